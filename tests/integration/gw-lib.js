// SPDX-License-Identifier: Apache-2.0
//
// Test helpers for the gateway's agent receiver, written independently of
// the C code: a protobuf encoder/decoder for the agent protocol
// (proto/stackrelay/v1/*.proto field numbers), an HTTP/2 client (Node's
// built-in http2), a gateway process starter, and a /metrics reader.
'use strict';

const http = require('node:http');
const http2 = require('node:http2');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const zlib = require('node:zlib');
const { spawn, execFileSync } = require('node:child_process');

// ---- protobuf wire format ----

class Writer {
  constructor() { this.parts = []; }
  raw(buf) { this.parts.push(Buffer.from(buf)); return this; }
  varintRaw(v) {
    let n = BigInt(v);
    const out = [];
    do {
      let b = Number(n & 0x7fn);
      n >>= 7n;
      if (n) b |= 0x80;
      out.push(b);
    } while (n);
    return this.raw(out);
  }
  key(field, wt) { return this.varintRaw((field << 3) | wt); }
  varint(field, v) { if (v === undefined || v === null || BigInt(v) === 0n) return this; return this.key(field, 0).varintRaw(v); }
  bool(field, v) { return v ? this.key(field, 0).varintRaw(1) : this; }
  fixed64(field, v) {
    if (!v) return this;
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    return this.key(field, 1).raw(b);
  }
  bytes(field, buf) {
    if (buf === undefined || buf === null) return this;
    buf = Buffer.from(buf);
    if (buf.length === 0) return this;
    return this.key(field, 2).varintRaw(buf.length).raw(buf);
  }
  string(field, s) { return s ? this.bytes(field, Buffer.from(s, 'utf8')) : this; }
  msg(field, w) { const b = w.finish(); return this.key(field, 2).varintRaw(b.length).raw(b); }
  finish() { return Buffer.concat(this.parts); }
}

function frame(f) {
  return new Writer().bytes(1, f.exe).varint(2, f.address).varint(3, f.kind ?? 1);
}

function stackDef(s) {
  const w = new Writer().bytes(1, s.id);
  for (const f of s.frames) w.msg(2, frame(f));
  return w.bool(3, s.truncated);
}

function executableDef(e) {
  return new Writer().bytes(1, e.id).varint(2, e.idKind ?? 1).string(3, e.fileName).string(4, e.path)
    .varint(5, e.fileSize).bytes(6, e.gnuBuildId).string(7, e.debuglink).bool(8, e.isGo);
}

function kernelDef(k) {
  const w = new Writer().bytes(1, k.id).string(2, k.release).bytes(3, k.buildId).string(4, k.bootId);
  for (const m of k.modules || [])
    w.msg(5, new Writer().string(1, m.name).varint(2, m.start).varint(3, m.size).bytes(4, m.buildId));
  return w;
}

function sample(s) {
  return new Writer().bytes(1, s.stackId).varint(2, s.pid).varint(3, s.tid).string(4, s.threadName)
    .string(5, s.processName).string(6, s.executablePath).string(7, s.containerId).varint(8, s.count)
    .fixed64(9, s.start).fixed64(10, s.end).varint(11, s.startTicks).bytes(12, s.kernelId).string(13, s.podUid);
}

function symbolTable(t) {
  const w = new Writer().bytes(1, t.exe);
  for (const s of t.symbols || [])
    w.msg(2, new Writer().varint(1, s.address).varint(2, s.size).string(3, s.name));
  for (const src of t.sources || []) w.string(3, src);
  return w.string(4, t.error);
}

// req: {version, instanceId, sequence, frequency, hostName, nodeName, samples, stacks, executables, kernels, symbolTables,
//      drops, probeSymbols}
function encodePushRequest(req) {
  const w = new Writer().varint(1, req.version ?? 1);
  w.msg(2, new Writer().bytes(1, req.instanceId).string(2, req.hostName ?? 'node-a').string(3, req.nodeName)
    .string(4, 'test'));
  w.varint(3, req.sequence).varint(4, req.frequency ?? 19);
  for (const s of req.samples || []) w.msg(5, sample(s));
  for (const s of req.stacks || []) w.msg(6, stackDef(s));
  for (const e of req.executables || []) w.msg(7, executableDef(e));
  for (const k of req.kernels || []) w.msg(8, kernelDef(k));
  for (const t of req.symbolTables || []) w.msg(9, symbolTable(t));
  for (const p of req.probeSymbols || []) w.bytes(11, p);
  if (req.drops)
    w.msg(10, new Writer().varint(1, req.drops.ringBufferFull).varint(2, req.drops.stackErrors)
      .varint(3, req.drops.bufferOverflow).varint(4, req.drops.processUnknown));
  return w.finish();
}

function readVarint(buf, pos) {
  let v = 0n, shift = 0n;
  for (;;) {
    if (pos >= buf.length) throw new Error('truncated varint');
    const b = buf[pos++];
    v |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return [v, pos];
    shift += 7n;
  }
}

function decodePushResponse(buf) {
  const r = { protocolVersion: 0, accepted: 0, missingStacks: [], missingExecutables: [], missingKernels: [],
    wantedSymbols: [], retryAfterMs: 0, error: '' };
  let pos = 0;
  while (pos < buf.length) {
    let key, v;
    [key, pos] = readVarint(buf, pos);
    const field = Number(key >> 3n), wt = Number(key & 7n);
    if (wt === 0) {
      [v, pos] = readVarint(buf, pos);
      if (field === 1) r.protocolVersion = Number(v);
      else if (field === 2) r.accepted = Number(v);
      else if (field === 7) r.retryAfterMs = Number(v);
    } else if (wt === 2) {
      [v, pos] = readVarint(buf, pos);
      const b = buf.subarray(pos, pos + Number(v));
      pos += Number(v);
      const hex = Buffer.from(b).toString('hex');
      if (field === 3) r.missingStacks.push(hex);
      else if (field === 4) r.missingExecutables.push(hex);
      else if (field === 5) r.missingKernels.push(hex);
      else if (field === 6) r.wantedSymbols.push(hex);
      else if (field === 8) r.error = b.toString('utf8');
    } else throw new Error(`unexpected wire type ${wt}`);
  }
  return r;
}

// ---- a small deterministic world of definitions ----

function id(prefix, n, len = 16) {
  return crypto.createHash('sha256').update(`${prefix}:${n}`).digest().subarray(0, len);
}

function makeWorld(nStacks, opts = {}) {
  const exes = [], stacks = [];
  const nExes = opts.nExes ?? 4;
  for (let i = 0; i < nExes; i++)
    exes.push({ id: id('exe', i, 20), idKind: 1, fileName: `bin${i}`, path: `/usr/bin/bin${i}`, fileSize: 1000 + i });
  const kernel = opts.kernel ? { id: id('kernel', 0), release: '6.1.0-test', bootId: 'boot-0' } : null;
  for (let i = 0; i < nStacks; i++) {
    const frames = [];
    const depth = 3 + (i % 5);
    for (let d = 0; d < depth; d++)
      frames.push({ exe: exes[(i + d) % nExes].id, address: 0x1000 + i * 16 + d, kind: 1 });
    if (kernel) frames.unshift({ exe: kernel.id, address: 0xffffffff81000000 + i, kind: 2 });
    stacks.push({ id: id(`stack${opts.salt ?? ''}`, i), frames });
  }
  return { exes, stacks, kernel };
}

// ---- HTTP/2 ----

function connect(url, tlsOpts = {}) {
  return new Promise((resolve, reject) => {
    const s = http2.connect(url, tlsOpts);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

// Posts body; resolves {status, headers, body (Buffer)}. Rejects on stream/session errors.
function post(session, body, headers = {}, timeoutMs = 10000) {
  return new Promise((resolve, reject) => {
    const req = session.request({
      ':method': 'POST',
      ':path': '/stackrelay.v1.Ingest/Push',
      'content-type': 'application/x-protobuf',
      ...headers,
    });
    const chunks = [];
    let status = 0, hdrs = {};
    const timer = setTimeout(() => { req.close(); reject(new Error(`request timed out after ${timeoutMs} ms`)); }, timeoutMs);
    req.on('response', (h) => { status = h[':status']; hdrs = h; });
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => { clearTimeout(timer); resolve({ status, headers: hdrs, body: Buffer.concat(chunks) }); });
    req.on('error', (e) => { clearTimeout(timer); reject(e); });
    req.end(body);
  });
}

async function push(session, req, opts = {}) {
  let body = encodePushRequest(req);
  const headers = { ...(opts.headers || {}) };
  if (opts.gzip) { body = zlib.gzipSync(body); headers['content-encoding'] = 'gzip'; }
  const r = await post(session, body, headers, opts.timeoutMs);
  r.response = safeDecode(r.body);
  return r;
}

function safeDecode(b) {
  try { return decodePushResponse(b); } catch (e) { return { error: `undecodable: ${e.message}` }; }
}

// ---- processes ----

// A temporary directory removed when the process exits (set KEEP_TMP=1 to keep it for debugging).
function tmpdir(name) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `sr-${name}-`));
  if (!process.env.KEEP_TMP) process.on('exit', () => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

// Starts the gateway with a YAML config; resolves {proc, agentAddress, metricsAddress, log()}.
function startGateway(yaml, dir, extraArgs = [], bin = process.env.SR_GATEWAY) {
  const cfg = path.join(dir, `gateway-${Date.now()}-${Math.random().toString(16).slice(2)}.yaml`);
  fs.writeFileSync(cfg, yaml);
  if (!bin) throw new Error('SR_GATEWAY (or the binary to run) is not set');
  const proc = spawn(bin, ['--config', cfg, ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`gateway did not start:\n${log}`)); }, 10000);
    proc.stderr.on('data', (d) => {
      log += d;
      const a = /listening for agents.* address=(\S+)/.exec(log);
      const m = /telemetry server listening"? address=(\S+)/.exec(log);
      if (a && m && /msg=running/.test(log)) {
        clearTimeout(timer);
        resolve({ proc, agentAddress: a[1], metricsAddress: m[1], log: () => log });
      }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`gateway exited with ${code}:\n${log}`)); });
  });
}

function stopGateway(g, timeoutMs = 15000) {
  return new Promise((resolve, reject) => {
    if (g.proc.exitCode !== null) return resolve(g.proc.exitCode);
    const timer = setTimeout(() => { g.proc.kill('SIGKILL'); reject(new Error(`gateway did not stop:\n${g.log()}`)); }, timeoutMs);
    g.proc.removeAllListeners('exit');
    g.proc.on('exit', (code, sig) => { clearTimeout(timer); resolve(code ?? sig); });
    g.proc.kill('SIGTERM');
  });
}

function httpGet(address, p) {
  return new Promise((resolve, reject) => {
    const [host, port] = splitAddress(address);
    const req = http.get({ host, port, path: p, timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
}

function splitAddress(a) {
  const i = a.lastIndexOf(':');
  return [a.slice(0, i).replace(/^\[|\]$/g, ''), Number(a.slice(i + 1))];
}

// Parses Prometheus text into {name{labels}: value}; get(name, labels) sums matching series.
async function metrics(address) {
  const r = await httpGet(address, '/metrics');
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}`);
  const series = [];
  for (const line of r.body.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`bad metrics line: ${line}`);
    const labels = {};
    for (const lm of (m[3] || '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]] = lm[2];
    series.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return {
    text: r.body,
    get(name, want = {}) {
      let sum = 0, found = false;
      for (const s of series) {
        if (s.name !== name) continue;
        if (Object.entries(want).every(([k, v]) => s.labels[k] === v)) { sum += s.value; found = true; }
      }
      return found ? sum : 0;
    },
  };
}

// Follows the protocol before uploading tables (docs/agent-protocol.md, "Who may upload"): a gateway takes a
// table only from the agent instance it asked in wanted_symbols. Sends first (a request whose samples use the
// executables, as instanceId), then probes ids until each was listed as wanted in an answer to this instance.
// Needs a symbolize processor that cannot name them otherwise. Returns the next free sequence.
async function waitAsked(session, instanceId, ids, first, opts = {}) {
  const want = new Set(ids.map((b) => Buffer.from(b).toString('hex')));
  let seq = opts.sequence ?? 1000;
  const note = (r) => {
    if (r.status !== 200) throw new Error(`asking to be asked: status ${r.status} ${r.response.error}`);
    for (const h of r.response.wantedSymbols) want.delete(h);
  };
  if (first) {
    const r = await push(session, { ...first, instanceId, sequence: seq++ }, opts);
    note(r);
    if (first.samples && r.response.accepted !== first.samples.reduce((n, x) => n + (x.count || 0), 0))
      throw new Error(`asking to be asked: ${r.response.accepted} samples accepted`);
  }
  const end = Date.now() + (opts.waitMs ?? 30000);
  while (want.size) {
    if (Date.now() > end) throw new Error(`the gateway did not ask for ${[...want].join(', ')}`);
    await new Promise((res) => setTimeout(res, 100));
    note(await push(session, { instanceId, sequence: seq++, probeSymbols: ids, nodeName: first && first.nodeName },
      opts));
  }
  return seq;
}

async function waitFor(fn, timeoutMs = 10000, what = 'condition') {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

// A sink that answers every OTLP/HTTP POST with 200 (HTTP/1.1); counts requests.
function startSink() {
  return new Promise((resolve) => {
    const st = { requests: 0, bytes: 0 };
    const srv = http.createServer((req, res) => {
      let n = 0;
      req.on('data', (d) => { n += d.length; });
      req.on('end', () => { st.requests++; st.bytes += n; res.writeHead(200, { 'content-type': 'application/x-protobuf' }); res.end(); });
    });
    srv.listen(0, '127.0.0.1', () => resolve({ srv, st, url: `http://127.0.0.1:${srv.address().port}` }));
  });
}

// Certificates with the openssl CLI: a CA, a server cert for 127.0.0.1/localhost, a client cert, and a rogue CA + client.
function makeCerts(dir) {
  const run = (args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ext = path.join(dir, 'san.ext');
  fs.writeFileSync(ext, 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  for (const ca of ['ca', 'rogue-ca']) {
    run(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${ca}.key`,
      '-out', `${ca}.crt`, '-days', '2', '-subj', `/CN=stackrelay test ${ca}`]);
  }
  const leaf = (name, ca, extfile) => {
    run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`,
      '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
    const args = ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial',
      '-out', `${name}.crt`, '-days', '2'];
    if (extfile) args.push('-extfile', extfile);
    run(args);
  };
  leaf('server', 'ca', ext);
  leaf('client', 'ca');
  leaf('rogue-client', 'rogue-ca');
  const p = (f) => path.join(dir, f);
  return {
    caFile: p('ca.crt'), serverCert: p('server.crt'), serverKey: p('server.key'),
    clientCert: p('client.crt'), clientKey: p('client.key'),
    rogueCert: p('rogue-client.crt'), rogueKey: p('rogue-client.key'),
  };
}

// A gateway: the agent receiver (with more of its keys when given: `key: value` at its level) straight to an
// uncompressed otlp_http exporter at sinkUrl.
// processors: name → its config in flow style, in pipeline order.
function agentGatewayYaml(sinkUrl, receiverKeys = '', processors = {}) {
  const names = Object.keys(processors);
  return `
receivers:
  agent:
    endpoint: 127.0.0.1:0
${receiverKeys ? `    ${receiverKeys}\n` : ''}${names.length ? `processors:\n${names.map((n) => `  ${n}: ${processors[n]}\n`).join('')}` : ''}exporters:
  otlp_http:
    endpoint: ${sinkUrl}
    compression: none
service:
  pipelines:
    profiles: {receivers: [agent], ${names.length ? `processors: [${names.join(', ')}], ` : ''}exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
  shutdown_timeout: 5s
`;
}

// Runs [name, fn] checks, printing `ok - name` or `not ok - name: why`; returns how many failed.
function runChecks(checks) {
  let failed = 0;
  for (const [name, fn] of checks) {
    try {
      fn();
      console.log(`ok - ${name}`);
    } catch (e) {
      failed++;
      console.log(`not ok - ${name}: ${e.message}`);
    }
  }
  return failed;
}

module.exports = {
  Writer, encodePushRequest, decodePushResponse, makeWorld, id, connect, post, push, waitAsked, tmpdir, startGateway,
  stopGateway, httpGet, metrics, waitFor, startSink, makeCerts, splitAddress, agentGatewayYaml, runChecks,
};
