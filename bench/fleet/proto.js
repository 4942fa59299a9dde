// SPDX-License-Identifier: Apache-2.0
// The agent protocol's messages as the fleet simulator sends them
// (proto/stackrelay/v1/ingest.proto, types.proto), built on the wire helpers
// of bench/gateway-throughput/wire.js. Executable and kernel definitions and a
// process's sample fields are encoded once and kept as bytes; stack
// definitions and samples are written straight into the request's buffer.
'use strict';

const { putVarint, fields } = require('../gateway-throughput/wire.js');

const LEN = 2, VARINT = 0, I64 = 1;
const key = (f, wt) => putVarint(f * 8 + wt);

function lenField(f, buf) {
  return Buffer.concat([key(f, LEN), putVarint(buf.length), buf]);
}
function bigVarint(v) {
  const out = [];
  do {
    let c = Number(v & 0x7fn);
    v >>= 7n;
    if (v) c |= 0x80;
    out.push(c);
  } while (v);
  return Buffer.from(out);
}
function varField(f, v) {
  if (!v) return Buffer.alloc(0);
  return Buffer.concat([key(f, VARINT), typeof v === 'bigint' ? bigVarint(v) : putVarint(v)]);
}
function strField(f, s) { return s ? lenField(f, Buffer.from(s, 'utf8')) : Buffer.alloc(0); }
function fixed64Field(f, v) {
  const b = Buffer.alloc(9);
  b[0] = f * 8 + I64;
  b.writeBigUInt64LE(BigInt(v), 1);
  return b;
}

// Writes a varint (a Number below 2^53, or a BigInt) at b[i]; returns the index after it.
function writeVarint(b, i, v) {
  if (typeof v === 'bigint') {
    while (v >= 0x80n) { b[i++] = Number(v & 0x7fn) | 0x80; v >>= 7n; }
    b[i++] = Number(v);
    return i;
  }
  while (v >= 0x80) { b[i++] = (v % 128) | 0x80; v = Math.floor(v / 128); }
  b[i++] = v;
  return i;
}

// PushRequest field 6 (StackDef) for frames [{exe, address, kind (1 user, 2 kernel)}], written at b[i] (at most
// 28 bytes and 48 a frame); id: the stack's 16-byte ID as four 32-bit little-endian words. Returns the index after it.
function writeStackDef(b, i, id, frames) {
  const at = i;
  i += 4; // room for the field key and a 3-byte length
  b[i++] = 0x0a; b[i++] = 16;
  for (const w of id) { b.writeUInt32LE(w, i); i += 4; }
  for (const fr of frames) {
    const start = i;
    i += 2; // key + 1-byte length (a frame is < 128 bytes)
    b[i++] = 0x0a; b[i++] = fr.exe.length; fr.exe.copy(b, i); i += fr.exe.length;
    b[i++] = 0x10; i = writeVarint(b, i, fr.address);
    b[i++] = 0x18; b[i++] = fr.kind;
    b[start] = 0x12; b[start + 1] = i - start - 2;
  }
  const len = i - at - 4;
  // Field 6, length as a 3-byte varint (padded: valid protobuf, len < 2^21).
  b[at] = 0x32; b[at + 1] = (len & 0x7f) | 0x80; b[at + 2] = ((len >> 7) & 0x7f) | 0x80; b[at + 3] = (len >> 14) & 0x7f;
  return i;
}

function executableDef(e) {
  return lenField(7, Buffer.concat([lenField(1, e.id), varField(2, 1), strField(3, e.fileName), strField(4, e.path),
    varField(5, e.fileSize), lenField(6, e.id)]));
}

// PushRequest field 8: a kernel space (docs/agent-protocol.md, "Kernel frames"): runtime addresses of a boot
// (addressing 0, boot_id), image offsets (1) or a module's offsets (2, module), with the build ID.
function kernelDef(k) {
  const f = [lenField(1, k.id), strField(2, k.release)];
  if (k.buildId) f.push(lenField(3, k.buildId));
  if (k.bootId) f.push(strField(4, k.bootId));
  if (k.addressing) f.push(varField(6, k.addressing));
  if (k.module) f.push(strField(7, k.module));
  return lenField(8, Buffer.concat(f));
}

// The part of a Sample that is the same for every sample of a process: process name, executable path,
// container ID and pod UID.
function processFields(p) {
  return Buffer.concat([strField(5, p.processName), strField(6, p.executablePath), strField(7, p.containerId),
    strField(13, p.podUid)]);
}

function varintLen(v) {
  let n = 1;
  for (; v >= 0x80; v = Math.floor(v / 128)) n++;
  return n;
}

// One Sample field (5) written at b[i] (at most 80 bytes beside procFields): the stack's ID (four 32-bit words),
// pid, tid, the kernel space's ID (a 16-byte Buffer, or null), the process's fields, a count and the window's
// times (18 bytes). Returns the index after it.
function writeSample(b, i, id, pid, tid, kernelId, procFields, count, timesBuf) {
  const len = 18 + 1 + varintLen(pid) + 1 + varintLen(tid) + (kernelId ? 18 : 0) + procFields.length + 1 +
    varintLen(count) + timesBuf.length;
  b[i++] = 0x2a;
  i = writeVarint(b, i, len);
  b[i++] = 0x0a; b[i++] = 16;
  for (const w of id) { b.writeUInt32LE(w, i); i += 4; }
  b[i++] = 0x10; i = writeVarint(b, i, pid);
  b[i++] = 0x18; i = writeVarint(b, i, tid);
  if (kernelId) { b[i++] = 0x62; b[i++] = 16; kernelId.copy(b, i); i += 16; }
  i += procFields.copy(b, i);
  b[i++] = 0x40; i = writeVarint(b, i, count);
  i += timesBuf.copy(b, i);
  return i;
}
function windowTimes(startNs, endNs) {
  return Buffer.concat([fixed64Field(9, startNs), fixed64Field(10, endNs)]);
}

// A SymbolTable's fields after its executable_id (symbols, sources, error): the same for every ID of one layout.
function symbolTableBody(symbols, error) {
  const parts = [];
  for (const s of symbols)
    parts.push(lenField(2, Buffer.concat([varField(1, s.address), varField(2, s.size), strField(3, s.name)])));
  if (!error) parts.push(strField(3, 'symtab'));
  parts.push(strField(4, error));
  return Buffer.concat(parts);
}

function symbolTable(exeId, symbols, error, body) {
  return lenField(9, Buffer.concat([lenField(1, exeId), body || symbolTableBody(symbols, error)]));
}

// The request's head: version, agent, sequence, frequency.
function requestHead(agent, sequence, hz) {
  const a = Buffer.concat([lenField(1, agent.instanceId), strField(2, agent.hostName), strField(3, agent.nodeName),
    strField(4, 'fleet-sim')]);
  return Buffer.concat([varField(1, 1), lenField(2, a), varField(3, sequence), varField(4, hz)]);
}

function decodePushResponse(buf) {
  const r = { accepted: 0, missingStacks: [], missingExecutables: [], missingKernels: [], wantedSymbols: [],
    retryAfterMs: 0, error: '' };
  for (const f of fields(buf)) {
    if (f.f === 2) r.accepted = f.val;
    else if (f.f === 7) r.retryAfterMs = f.val;
    else if (f.f === 3) r.missingStacks.push(f.body.toString('hex'));
    else if (f.f === 4) r.missingExecutables.push(f.body.toString('hex'));
    else if (f.f === 5) r.missingKernels.push(f.body.toString('hex'));
    else if (f.f === 6) r.wantedSymbols.push(f.body.toString('hex'));
    else if (f.f === 8) r.error = f.body.toString('utf8');
  }
  return r;
}

module.exports = { writeStackDef, executableDef, kernelDef, processFields, writeSample, writeVarint, windowTimes, symbolTable,
  symbolTableBody,
  requestHead, decodePushResponse };
