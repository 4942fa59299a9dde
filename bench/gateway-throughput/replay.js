#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// Replays recorded agent traffic (varint-delimited stackrelay.v1.PushRequest,
// as `stackrelay-agent --output FILE` writes it) to a gateway's agent receiver
// over h2c, as many agents would, with Node's built-in http2 only.
//
// Every agent has its own connection and agent.instance_id and counts its
// own sequence, so the gateway's de-duplication never mistakes a replay for a
// resend. An agent first sends the recording's definitions (stacks,
// executables, kernels: what a real agent sends once), then, until the time is
// up, one request per recorded window with that window's samples only (the
// steady state of an agent), gzip-compressed like the agent's default
// `gateway.compression: gzip`, `--inflight` requests at once per connection.
//
// With --symbols FILE (varint-delimited stackrelay.v1.SymbolTable, as the
// agent uploaded them while the recording was made: capture.js), every agent
// answers the gateway's wanted_symbols like the agent does (agent/sender-symbols.c):
// one upload request per wanted ID, once per ID in its life, after its
// pending samples, at most AGENT_SENDER_SYMBOL_RATE_BYTES (1 MiB/s, a bucket
// of max_symbol_upload_size 8 MiB that starts with 1 MiB) per agent, and
// when its time is up, what is still queued without the limit (the agent's
// flush at exit) before it closes its connection. An ID
// without a table in FILE (or without --symbols) gets the table an agent sends
// when it cannot reach the file: no symbols, `error` set.
//
// Usage: replay.js --recording FILE --url http://HOST:PORT [--agents 16] [--seconds 10] [--inflight 4]
//                  [--symbols FILE]
// Prints one JSON line: requests by status, sample records and CPU samples
// (sum of Sample.count) accepted, frames in the accepted records (sum of
// their stacks' depths), body bytes on the wire (gzip) and before
// compression, symbol uploads.
'use strict';
const http2 = require('http2');
const zlib = require('zlib');
const fs = require('fs');
const crypto = require('crypto');

const args = { agents: '16', seconds: '10', inflight: '4' };
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
if (!args.recording || !args.url) {
  console.error('usage: replay.js --recording FILE --url http://HOST:PORT [--agents N] [--seconds S] [--inflight N]');
  process.exit(2);
}

const { varint, putVarint, fields } = require('./wire');

// ---- the recording ----
const rec = fs.readFileSync(args.recording);
const windows = []; // per recorded request: its Sample fields, records, CPU samples, frames
const defs = [];
const depth = new Map(); // stack ID (hex) -> frames
const recSamples = []; // [window, stack ID hex] to count frames once the stacks are known
let protocolVersion = 1, freq = 0;
for (let i = 0; i < rec.length;) {
  let l;
  [l, i] = varint(rec, i);
  const req = rec.subarray(i, i + l);
  i += l;
  const w = { parts: [], records: 0, samples: 0, frames: 0 };
  for (const x of fields(req)) {
    if (x.f === 1) protocolVersion = x.val;
    else if (x.f === 4) freq = x.val;
    else if (x.f === 5) {
      w.parts.push(x.raw);
      w.records++;
      const sf = fields(x.body);
      const c = sf.find((y) => y.f === 8);
      const id = sf.find((y) => y.f === 1);
      w.samples += c ? c.val : 1;
      recSamples.push([w, id ? id.body.toString('hex') : '']);
    } else if (x.f === 6 || x.f === 7 || x.f === 8) {
      defs.push(x.raw);
      if (x.f === 6) {
        const sf = fields(x.body);
        const id = sf.find((y) => y.f === 1);
        if (id) depth.set(id.body.toString('hex'), sf.filter((y) => y.f === 2).length);
      }
    }
  }
  if (w.records) windows.push(w);
}
for (const [w, id] of recSamples) w.frames += depth.get(id) || 0;
for (const w of windows) w.parts = Buffer.concat(w.parts);
// ---- symbol tables the agent uploaded (--symbols) ----
const tables = new Map(); // executable/kernel ID (hex) -> SymbolTable bytes
if (args.symbols) {
  const b = fs.readFileSync(args.symbols);
  for (let i = 0; i < b.length;) {
    let l;
    [l, i] = varint(b, i);
    const t = b.subarray(i, i + l);
    i += l;
    const id = fields(t).find((y) => y.f === 1);
    if (id) tables.set(id.body.toString('hex'), t);
  }
}
const SYMBOL_RATE = 1024 * 1024, SYMBOL_BUCKET = 8 * 1024 * 1024; // agent/sender-parts-private.h, agent defaults
function symbolTable(id) {
  const t = tables.get(id.toString('hex'));
  if (t) return [t, false];
  const err = Buffer.from('executable not reachable on this node: no table in the replayed recording');
  return [Buffer.concat([Buffer.from([0x0a]), putVarint(id.length), id, Buffer.from([0x22]), putVarint(err.length),
    err]), true];
}
// PushResponse.wanted_symbols (field 6); the receiver answers without compression.
function wanted(resp) {
  try {
    return fields(resp).filter((y) => y.f === 6).map((y) => Buffer.from(y.body));
  } catch (e) {
    return [];
  }
}
if (!windows.length) {
  console.error('replay.js: no samples in ' + args.recording);
  process.exit(1);
}
const defsBuf = Buffer.concat(defs);

function body(agent, seq, payload) {
  const info = Buffer.concat([Buffer.from([0x0a, 16]), agent.id,
    Buffer.from([0x12]), putVarint(agent.host.length), agent.host]);
  const head = Buffer.concat([Buffer.from([0x08]), putVarint(protocolVersion),
    Buffer.from([0x12]), putVarint(info.length), info,
    Buffer.from([0x18]), putVarint(seq),
    Buffer.from([0x20]), putVarint(freq)]);
  return Buffer.concat([head, payload]);
}

// ---- sending ----
const stats = { requests: 0, statuses: {}, records: 0, samples: 0, frames: 0, wire_bytes: 0, plain_bytes: 0,
  definition_requests: 0, errors: 0, wanted: 0, uploads: 0, upload_statuses: {}, upload_error_tables: 0,
  upload_bytes: 0, upload_ids: 0 };
const uploadedIds = new Set();
const n = Number(args.agents), inflight = Number(args.inflight);
const deadline = Date.now() + Number(args.seconds) * 1000;
const u = new URL(args.url);
const path = (u.pathname.replace(/\/$/, '')) + '/stackrelay.v1.Ingest/Push';
let live = n;

function startAgent(k) {
  const agent = { id: crypto.randomBytes(16), host: Buffer.from('replay-' + k), seq: 0, next: k % windows.length,
    busy: 0, done: false, asked: new Set(), uploads: [], tokens: SYMBOL_RATE, tokensAt: Date.now(),
    timer: null };
  const s = http2.connect(u.origin);
  s.on('error', () => { stats.errors++; });
  const post = (payload, w, isDefs, cb) => {
    const plain = body(agent, ++agent.seq, payload);
    const z = zlib.gzipSync(plain, { level: 1 });
    const r = s.request({ ':method': 'POST', ':path': path, 'content-type': 'application/x-protobuf',
      'content-encoding': 'gzip' });
    let status = 0;
    const resp = [];
    r.on('response', (h) => { status = h[':status']; });
    r.on('data', (c) => { resp.push(c); });
    r.on('end', () => {
      if (isDefs === 'upload') {
        stats.uploads++;
        stats.upload_statuses[status] = (stats.upload_statuses[status] || 0) + 1;
        stats.upload_bytes += z.length;
      } else {
        stats.requests++;
        stats.statuses[status] = (stats.statuses[status] || 0) + 1;
        if (status === 200 && w) {
          stats.records += w.records;
          stats.samples += w.samples;
          stats.frames += w.frames;
        }
        if (isDefs) stats.definition_requests++;
        stats.wire_bytes += z.length;
        stats.plain_bytes += plain.length;
      }
      if (status === 200) {
        for (const id of wanted(Buffer.concat(resp))) {
          stats.wanted++;
          const h = id.toString('hex');
          // Once per ID in an agent's life (its symbol set), like the agent.
          if (!agent.asked.has(h)) {
            agent.asked.add(h);
            agent.uploads.push(id);
          }
        }
      }
      cb();
    });
    r.on('error', () => { stats.errors++; cb(); });
    r.end(z);
  };
  const done = () => { agent.busy--; pump(); };
  const upload = () => {
    const id = agent.uploads.shift();
    const [t, isError] = symbolTable(id);
    agent.tokens -= t.length;
    if (isError) stats.upload_error_tables++;
    if (!uploadedIds.has(id.toString('hex'))) {
      uploadedIds.add(id.toString('hex'));
      stats.upload_ids++;
    }
    agent.busy++;
    post(Buffer.concat([Buffer.from([0x4a]), putVarint(t.length), t]), null, 'upload', done);
  };
  const pump = () => {
    while (agent.busy < inflight && Date.now() < deadline) {
      if (agent.uploads.length) {
        // Uploads go between sample pushes, within the agent's rate limit.
        const now = Date.now();
        agent.tokens = Math.min(SYMBOL_BUCKET, agent.tokens + (now - agent.tokensAt) / 1000 * SYMBOL_RATE);
        agent.tokensAt = now;
        if (agent.tokens > 0) {
          upload();
          continue;
        }
        if (!agent.timer) {
          agent.timer = setTimeout(() => { agent.timer = null; pump(); },
            Math.min(Math.ceil(-agent.tokens / SYMBOL_RATE * 1000) + 1, Math.max(deadline - now, 0) + 1));
        }
      }
      const w = windows[agent.next];
      agent.next = (agent.next + 1) % windows.length;
      agent.busy++;
      post(w.parts, w, false, done);
    }
    // Time is up: like the agent's flush at exit, every table it was asked for goes before it leaves,
    // without the rate limit (the gateway asks one agent per table: one that left with its uploads
    // queued would leave the table missing until another agent is asked, 30 s later).
    while (Date.now() >= deadline && agent.uploads.length && agent.busy < inflight) upload();
    if (agent.busy === 0 && !agent.done && Date.now() >= deadline) {
      agent.done = true;
      if (agent.timer) clearTimeout(agent.timer);
      s.close();
      if (--live === 0) console.log(JSON.stringify(stats));
    }
  };
  // Definitions first (with the first window's samples), as an agent's first push carries them.
  agent.busy++;
  post(Buffer.concat([defsBuf, windows[0].parts]), windows[0], true, done);
}
for (let k = 0; k < n; k++) startAgent(k);
// Bounded, like every bench helper.
setTimeout(() => { console.error('replay.js: gave up waiting for answers'); process.exit(1); },
  (Number(args.seconds) + 60) * 1000).unref();
