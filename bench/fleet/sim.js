#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// Fleet simulator: N simulated nodes, each an agent speaking the real agent
// protocol (docs/agent-protocol.md) over its own HTTP/2 (h2c) connection to
// TARGET (a gateway or a balancer in front of replicas):
//
//  - every node has its processes (images at their current versions, in pods
//    from world.js or on the host), its kernel, and a pool of stacks per
//    process; kernels come in `--kernel-builds` builds whose frames are image
//    and module offsets, so nodes of one build share kernel stacks and symbol
//    tables (`--kernel-per-boot 1`: every node's kernel its own, with runtime
//    addresses, as agents without CAP_SYSLOG send them); every window
//    `--stack-churn` of each pool is replaced by new stacks, processes
//    restart (`--proc-churn`, and when their pod is replaced), images roll
//    out new executables (`--deploy-every`);
//  - a window (`--window` s) takes hz × cpus × window CPU samples, aggregated
//    by (stack, pid, tid) as the agent does, and queues them;
//  - definitions go on first use per connection; `missing_*` answers are
//    resent with every definition under a new sequence (3 rounds, then the
//    samples are dropped as `rejected`); no answer, 408, 429, 5xx and
//    `retry_after_ms` are retried with the same sequence and bytes
//    (Retry-After honoured, else 500 ms doubling to 30 s, jitter [d/2, d]);
//    other 4xx drop the request's samples (`rejected`);
//  - `wanted_symbols` are answered with an upload (a synthetic table) once per
//    ID per agent instance, and again as the agent does when wanted again
//    (`--reupload-after` s since the last upload, doubling, up to 1 h);
//  - agents restart (`--restart-every`: new instance ID and connection, its
//    queue carried over as a flushed agent would have delivered it) and
//    reconnect (`--conn-age`, and after every transport error);
//  - the buffer holds at most `--buffer-windows` windows per node; beyond, the
//    oldest window after the head is dropped (`buffer_full`);
//  - `--census M` sends nothing: it churns the fleet through M minutes in
//    virtual time and prints its working set every 5 minutes (census()).
//
// Accounting, per simulator process, at every moment:
//   taken = accepted + buffered + buffer_full + rejected + flush_timeout
// It prints `stats {json}` every --stats-every seconds and `final {json}` at
// the end (after flushing for at most --flush-timeout s). SIGTERM or
// SIGINT ends the run early (same flush).
'use strict';

const http2 = require('node:http2');
const zlib = require('node:zlib');
const crypto = require('node:crypto');
const P = require('./proto.js');
const W = require('./world.js');

function parseArgs(argv) {
  const o = { target: '127.0.0.1:4317', nodes: 10, firstNode: 0, hz: 19, cpus: 16, window: 10, duration: 60,
    procs: 12, stacksPerProc: 40, threads: 2, images: 200, templates: 2000, stackChurn: 0.02, procChurn: 0.01,
    deployEvery: 0, restartEvery: 0, connAge: 600, podsPerNode: 4, podLifetime: 0, epoch: 0, hostProcs: 0.25,
    kernelStacks: 0.3, kernelSymbols: 256, kernelBuilds: 3, kernelPerBoot: 0, reuploadAfter: 60, statsEvery: 5, flushTimeout: 60, bufferWindows: 30, timeout: 10, seed: 1, gzip: 1,
    census: 0 };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const k = a.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(k in o)) throw new Error(`unknown option ${a}`);
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    o[k] = typeof o[k] === 'number' ? Number(v) : v;
    if (typeof o[k] === 'number' && !Number.isFinite(o[k])) throw new Error(`${a}: not a number: ${v}`);
  }
  if (!o.epoch) o.epoch = Date.now();
  if (o.kernelSymbols < 256 || o.kernelSymbols % 256) throw new Error('--kernel-symbols: a multiple of 256');
  if (!Number.isInteger(o.kernelBuilds) || o.kernelBuilds < 1) throw new Error('--kernel-builds: at least 1');
  return o;
}

const opt = parseArgs(process.argv);

// Seeded PRNG (mulberry32), so runs are repeatable apart from timing.
let rs = (opt.seed * 2654435761 + opt.firstNode) >>> 0;
function rnd() {
  rs = (rs + 0x6d2b79f5) >>> 0;
  let t = rs;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

const stats = {
  taken: 0, accepted: 0, dropped: { buffer_full: 0, rejected: 0, flush_timeout: 0 }, requests: 0, statuses: {},
  transportErrors: 0, retries: 0, missingRounds: 0, resentMissing: 0, acceptedMismatch: 0, uploads: 0,
  uploadsFailed: 0, reuploads: 0, restarts: 0, connections: 0, windows: 0, records: 0, bytesSent: 0, errors: {},
  // Samples whose request had an attempt without an answer (timeout, reset) before it was answered: a
  // replica may have processed that attempt too (a duplicate no single replica can catch); and samples
  // dropped at the flush deadline in that state (the gateway may have them).
  acceptedAfterUnknown: 0, flushInDoubt: 0,
};
let latencies = [];

// Executables and kernel spaces by hex ID, for `missing_*` and `wanted_symbols`: {exe or k, def (its
// definition's bytes), hex, stamp (the last request that looked at it, see encodeSamples())}.
const exeByHex = new Map();
function exeEntry(e) {
  const k = e.id.toString('hex');
  let x = exeByHex.get(k);
  if (!x) { x = { exe: e, def: P.executableDef(e), hex: k, stamp: 0 }; exeByHex.set(k, x); }
  return x;
}
for (const l of W.libs) exeEntry(l);
const kernelByHex = new Map();
function kernelEntry(k) {
  if (!kernelByHex.has(k.hex)) kernelByHex.set(k.hex, { k, def: P.kernelDef(k), hex: k.hex, stamp: 0 });
  return k;
}
// A node's kernel: the image (a sample's kernel_id) and the modules its stacks may show.
const builds = new Map();
function kernelOfNode(n) {
  if (opt.kernelPerBoot) return { image: kernelEntry(W.kernelOf(n, 0)), modules: [] };
  const b = n % opt.kernelBuilds;
  let k = builds.get(b);
  if (!k) {
    k = W.kernelBuild(b);
    kernelEntry(k.image);
    k.modules.forEach(kernelEntry);
    builds.set(b, k);
  }
  return k;
}
// Uploaded kernel tables: one layout per kind of space (runtime, image, module), the same for every ID.
const kernelTableBodies = new Map();
function kernelTableBody(k) {
  let b = kernelTableBodies.get(k.kind);
  if (!b) {
    const n = k.kind === 'module' ? 256 : opt.kernelSymbols;
    b = P.symbolTableBody(W.symbolsFor(k.kind === 'module' ? 'kmod' : 'kernel', true, n, k.base));
    kernelTableBodies.set(k.kind, b);
  }
  return b;
}

// Stacks are shared between nodes (same image version and kernel build; per node for per-boot kernels).
const stackCache = new Map();
let stackCacheGen = 0;
// The frames of stack template t of image i at version v, leaf first, with the node's kernel frames on top
// (kernel: null for a user-only stack), and the kernel spaces they are in.
function framesOf(i, v, t, kernel) {
  const frames = W.templateFrames(i, v, t);
  const kernels = [];
  if (kernel) {
    frames.unshift(...W.kernelFrames(kernel.image, t, opt.kernelSymbols));
    kernels.push(kernel.image.hex);
    // One kernel stack in four runs in a module (a driver, a filesystem) on top of the image's frames.
    if (kernel.modules.length && W.mix(i, v, t, 99) % 4 === 0) {
      const mod = kernel.modules[W.mix(i, v, t, 98) % kernel.modules.length];
      frames.unshift(...W.moduleFrames(mod, t));
      kernels.push(mod.hex);
    }
  }
  return { frames, kernels };
}

// A stack: its template (i, v, t, the node's kernel or null), its ID (four 32-bit words, and hex), the kernel
// image's ID its samples carry, and the entries of the executables and kernel spaces it names. It holds no
// Buffer: its definition is written from the template when a request needs it (about once per connection),
// because a million kept Buffers (IDs, definitions, sample prefixes) made the simulator's garbage collector
// and malloc its biggest cost, and a 500-node simulator's heap 1.1 GB in 4 minutes.
function stackOf(i, v, t, kernel) {
  const k = kernel ? `${i}/${v}/${t}/${kernel.image.hex}` : `${i}/${v}/${t}`;
  let s = stackCache.get(k);
  if (s) { s.gen = stackCacheGen; return s; }
  if (opt.census) { // which template it is is all census() needs
    s = { hex: k, i, v, t, kernel, gen: stackCacheGen };
    stackCache.set(k, s);
    return s;
  }
  const { frames, kernels } = framesOf(i, v, t, kernel);
  // A content address as an agent makes one: 128 bits of a cryptographic hash. (Words of W.mix() shared its
  // 32-bit state: a million stacks a run gave about a hundred pairs of different stacks with one ID.)
  const d = W.h('stack', i, v, t, kernel ? kernel.image.hex : '');
  const exes = new Set();
  for (const f of frames) if (f.kind === 1) exes.add(exeByHex.get(f.hex));
  s = { i, v, t, kernel, id: [d.readUInt32LE(0), d.readUInt32LE(4), d.readUInt32LE(8), d.readUInt32LE(12)],
    hex: d.toString('hex', 0, 16), exes: [...exes], kernels: kernels.map((h) => kernelByHex.get(h)),
    kernelId: kernel ? kernel.image.id : null, stamp: 0, gen: stackCacheGen };
  stackCache.set(k, s);
  return s;
}
// Forget stacks no node used for a while (memory of the simulator itself).
function sweepStacks() {
  stackCacheGen++;
  for (const [k, s] of stackCache) if (stackCacheGen - s.gen > 3) stackCache.delete(k);
}

// The share of a window's samples of (process p, stack k, thread th), flattened: processes and stacks are
// Zipf-like (a few hot, a long tail), threads equal. The same for every node.
let weightTable = null;
function weights() {
  if (weightTable) return weightTable;
  const w = [];
  let sumw = 0;
  for (let p = 0; p < opt.procs; p++)
    for (let k = 0; k < opt.stacksPerProc; k++)
      for (let th = 0; th < opt.threads; th++) {
        const x = 1 / Math.pow(1 + p, 0.8) / (1 + k);
        w.push(x);
        sumw += x;
      }
  weightTable = Float64Array.from(w, (x) => x / sumw);
  return weightTable;
}

class SimNode {
  constructor(n, now = Date.now()) {
    this.n = n;
    this.name = `node-${n}`;
    this.kernel = kernelOfNode(n);
    this.nextPid = 1000 + Math.floor(rnd() * 1000);
    this.queue = [];        // windows (and resends), oldest first
    this.uploads = [];      // symbol tables to send, after the samples
    this.session = null;
    this.sent = new Set();  // IDs defined on the current connection
    this.newInstance();
    this.procs = [];
    for (let p = 0; p < opt.procs; p++) this.procs.push(this.newProc(p, now));
    this.busy = false;
    this.backoffMs = 0;
  }

  newInstance() {
    this.instance = { instanceId: crypto.randomBytes(16), hostName: this.name, nodeName: this.name };
    this.seq = 0;
    this.uploaded = new Map(); // ID → { n uploads, at (ms) of the last, queued }
    this.dropSession();
    this.restartAt = opt.restartEvery ? Date.now() + (0.5 + rnd()) * opt.restartEvery * 1000 : Infinity;
  }

  dropSession() {
    if (this.session) this.session.destroy();
    this.session = null;
    this.sent.clear();
  }

  // Process slot p: in a pod slot (p % podsPerNode) or on the host.
  newProc(p, now) {
    const onHost = opt.podsPerNode === 0 || W.frac('host', this.n, p) < opt.hostProcs;
    let image, pod = null, gen = 0;
    if (onHost) image = Math.floor(W.frac('hostimage', this.n, p) * opt.images);
    else {
      const slot = p % opt.podsPerNode;
      gen = W.podGeneration(this.n, slot, now, opt.epoch, opt.podLifetime * 1000);
      pod = W.podOf(this.n, slot, gen, opt.images);
      image = pod.image;
    }
    const version = W.imageVersion(image, now, opt.epoch, opt.deployEvery * 1000);
    const exe = W.imageExe(image, version);
    exeEntry(exe);
    const pid = this.nextPid++;
    const proc = { p, pid, image, version, pod, gen, stacks: [],
      fields: P.processFields({ processName: `svc${image}`, executablePath: exe.path,
        containerId: pod ? pod.containerId : '', podUid: pod ? pod.uid : '' }) };
    for (let k = 0; k < opt.stacksPerProc; k++) proc.stacks.push(this.pickStack(proc));
    return proc;
  }

  pickStack(proc) {
    // Mostly the image's shared templates; new unique ones at churn.
    const t = rnd() < 0.5 ? Math.floor(rnd() * opt.templates) : opt.templates + Math.floor(rnd() * 1e9);
    const withKernel = rnd() < opt.kernelStacks;
    return stackOf(proc.image, proc.version, t, withKernel ? this.kernel : null);
  }

  churn(now) {
    for (let p = 0; p < this.procs.length; p++) {
      const pr = this.procs[p];
      const podMoved = pr.pod && W.podGeneration(this.n, p % opt.podsPerNode, now, opt.epoch, opt.podLifetime * 1000) !== pr.gen;
      if (podMoved || rnd() < opt.procChurn) { this.procs[p] = this.newProc(p, now); continue; }
      for (let k = 0; k < pr.stacks.length; k++) {
        if (rnd() >= opt.stackChurn) continue;
        pr.stacks[k] = this.pickStack(pr);
      }
    }
  }

  // One window: hz × cpus × window samples, aggregated by (stack, pid, tid).
  takeWindow(now) {
    this.churn(now);
    const total = opt.hz * opt.cpus * opt.window;
    const wt = weights();
    const samples = [];
    let taken = 0, j = 0;
    for (const pr of this.procs) {
      for (let k = 0; k < pr.stacks.length; k++)
        for (let th = 0; th < opt.threads; th++, j++) {
          const x = total * wt[j];
          let c = Math.floor(x);
          if (rnd() < x - c) c++;
          if (!c) continue;
          samples.push({ stack: pr.stacks[k], proc: pr, tid: pr.pid + th, count: c });
          taken += c;
        }
    }
    const startNs = BigInt(now - opt.window * 1000) * 1000000n, endNs = BigInt(now) * 1000000n;
    stats.taken += taken;
    stats.windows++;
    stats.records += samples.length;
    this.queue.push({ samples, taken, round: 0, times: P.windowTimes(startNs, endNs) });
    // Buffer bound: drop the oldest queued window after the head.
    while (this.queue.length > opt.bufferWindows) {
      const [d] = this.queue.splice(1, 1);
      stats.dropped.buffer_full += d.taken;
    }
    this.pump();
  }

  async conn() {
    if (this.session && !this.session.closed && !this.session.destroyed) {
      if (Date.now() - this.sessionStart < opt.connAge * 1000) return this.session;
      this.dropSession();
    }
    const s = http2.connect(`http://${opt.target}`);
    s.on('error', () => {});
    s.on('goaway', () => { if (this.session === s) { this.session = null; this.sent.clear(); } });
    s.on('close', () => { if (this.session === s) { this.session = null; this.sent.clear(); } });
    await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('connect timeout')), opt.timeout * 1000);
      s.once('connect', () => { clearTimeout(t); resolve(); });
      s.once('error', (e) => { clearTimeout(t); reject(e); });
      s.once('close', () => { clearTimeout(t); reject(new Error('closed while connecting')); });
    });
    this.session = s;
    this.sessionStart = Date.now();
    this.sent.clear();
    stats.connections++;
    return s;
  }

  // Encodes a request of samples with the definitions it needs (all of them on a resend), compressed unless
  // --gzip 0. The request is assembled in one scratch buffer shared by the nodes (encoding is synchronous) and
  // compressed from it, so that a request allocates only its compressed bytes (which a retry sends again).
  // Whether a stack, executable or kernel space was looked at already in this request is a stamp on it (they
  // are shared by the nodes), so a connection's set of what it defined is asked once per distinct ID.
  encodeSamples(item) {
    const head = P.requestHead(this.instance, ++this.seq, opt.hz);
    const stamp = ++encodeStamp;
    const all = item.round > 0;
    const stacks = [], defs = [], ids = [];
    let len = head.length;
    for (const s of item.samples) {
      len += SAMPLE_MAX + s.proc.fields.length;
      const st = s.stack;
      if (st.stamp === stamp) continue;
      st.stamp = stamp;
      if (!all && this.sent.has(st.hex)) continue;
      stacks.push(st);
      ids.push(st.hex);
      for (const e of st.exes) this.needs(e, stamp, all, defs, ids);
      for (const k of st.kernels) this.needs(k, stamp, all, defs, ids);
    }
    item.defined = ids;
    len += stacks.length * STACK_DEF_MAX;
    for (const d of defs) len += d.length;
    const b = scratch(len);
    let off = head.copy(b, 0);
    for (const s of item.samples)
      off = P.writeSample(b, off, s.stack.id, s.proc.pid, s.tid, s.stack.kernelId, s.proc.fields, s.count, item.times);
    for (const st of stacks) off = P.writeStackDef(b, off, st.id, framesOf(st.i, st.v, st.t, st.kernel).frames);
    for (const d of defs) off += d.copy(b, off);
    return compress(b.subarray(0, off));
  }

  // An executable's or kernel space's definition goes with the request unless it went on this connection
  // already (or was looked at in this request).
  needs(x, stamp, all, defs, ids) {
    if (x.stamp === stamp) return;
    x.stamp = stamp;
    if (!all && this.sent.has(x.hex)) return;
    defs.push(x.def);
    ids.push(x.hex);
  }

  // What the request defined is known on this connection now (what it named without defining already was; a
  // profile of the rig showed adding every sample's IDs again cost 6 % of a simulator's time).
  markSent(item) {
    for (const id of item.defined) this.sent.add(id);
  }

  // Sends a request (as compress() made it) until it has a final answer; returns {status, response} or null when stopped.
  async sendUntilAnswered(gz, item) {
    let attempt = 0, backoff = 500;
    for (;;) {
      if (stopping && Date.now() > flushDeadline) return null;
      let status = 0, resp = null, retryAfterS = 0;
      const t0 = process.hrtime.bigint();
      try {
        const s = await this.conn();
        // Sent and not answered yet: if the flush ends now, the gateway may still take it (in doubt).
        if (item) item.inFlight = true;
        const r = await post(s, gz, opt.gzip ? { 'content-encoding': 'gzip' } : {}).finally(() => {
          if (item) item.inFlight = false;
        });
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
        status = r.status;
        stats.requests++;
        stats.bytesSent += gz.length;
        stats.statuses[status] = (stats.statuses[status] || 0) + 1;
        resp = P.decodePushResponse(r.body);
        retryAfterS = Number(r.headers['retry-after'] || 0);
      } catch (e) {
        stats.transportErrors++;
        if (item) item.unknown = true;
        const m = String(e.code || e.message).slice(0, 60);
        stats.errors[m] = (stats.errors[m] || 0) + 1;
        this.dropSession();
      }
      if (status === 200 && !resp.retryAfterMs) return { status, response: resp };
      if (status && status >= 400 && status < 500 && ![408, 425, 429, 401, 403].includes(status))
        return { status, response: resp };
      // Retry: same sequence, same bytes.
      attempt++;
      stats.retries++;
      let waitMs;
      if (resp && resp.retryAfterMs) waitMs = resp.retryAfterMs * (1 + 0.25 * rnd());
      else if (retryAfterS) waitMs = Math.min(retryAfterS, 300) * 1000 * (1 + 0.25 * rnd());
      else { waitMs = backoff * (0.5 + 0.5 * rnd()); backoff = Math.min(backoff * 2, 30000); }
      if (stopping) waitMs = Math.min(waitMs, Math.max(0, flushDeadline - Date.now()));
      await sleep(waitMs);
    }
  }

  async sendItem(item) {
    const body = this.encodeSamples(item);
    const r = await this.sendUntilAnswered(body, item);
    if (!r) return false;
    if (r.status !== 200) {
      stats.dropped.rejected += item.taken;
      const m = `HTTP ${r.status}: ${(r.response && r.response.error) || ''}`.slice(0, 100);
      stats.errors[m] = (stats.errors[m] || 0) + 1;
      return true;
    }
    this.markSent(item);
    const resp = r.response;
    const missing = new Set([...resp.missingStacks, ...resp.missingExecutables, ...resp.missingKernels]);
    const refused = [];
    let refusedCount = 0;
    if (missing.size) {
      for (const s of item.samples) {
        const st = s.stack;
        if (missing.has(st.hex) || st.exes.some((e) => missing.has(e.hex)) || st.kernels.some((k) => missing.has(k.hex))) {
          refused.push(s);
          refusedCount += s.count;
        }
      }
      for (const id of missing) this.sent.delete(id);
    }
    const expected = item.taken - refusedCount;
    if (item.unknown) stats.acceptedAfterUnknown += expected;
    if (resp.accepted !== expected) {
      stats.acceptedMismatch++;
      // The evidence for a failed check, kept bounded (soak.js prints the simulators' stderr on failure).
      if (process.env.SIM_DEBUG || stats.acceptedMismatch <= 5)
        console.error(`node ${this.n} seq ${this.seq}: accepted ${resp.accepted}, expected ${expected} of ${item.taken} ` +
          `(round ${item.round}, unknown ${!!item.unknown}); missing stacks/executables/kernels ${resp.missingStacks.length}/${resp.missingExecutables.length}/${resp.missingKernels.length} ${JSON.stringify([resp.missingExecutables, resp.missingKernels])}; ` +
          `refused here: ${refused.map((x) => `${x.stack.hex.slice(0, 8)}x${x.count}:${missing.has(x.stack.hex) ? 'S' : ''}` +
            `${x.stack.exes.filter((e) => missing.has(e.hex)).map((e) => 'E' + e.hex.slice(0, 6)).join('')}${x.stack.kernels.filter((k) => missing.has(k.hex)).map((k) => 'K' + k.hex.slice(0, 6)).join('')}` +
            '').join(' ')}`);
    }
    stats.accepted += expected;
    if (refused.length) {
      stats.missingRounds++;
      if (item.round >= 3) {
        stats.dropped.rejected += refusedCount;
        if (process.env.SIM_DEBUG)
          console.error(`node ${this.n} seq ${this.seq}: still missing after 3 resends: ${JSON.stringify([resp.missingStacks, resp.missingExecutables, resp.missingKernels])}; ` +
            `refused stacks ${refused.map((x) => x.stack.hex).join(',')}; accepted ${resp.accepted} of ${item.taken}`);
      }
      else {
        stats.resentMissing += refusedCount;
        this.queue.splice(1, 0, { samples: refused, taken: refusedCount, round: item.round + 1, times: item.times });
      }
    }
    // As the agent does (gateway.symbol_reupload_after): a table wanted again goes again once --reupload-after
    // seconds have passed since its last upload, then twice that, up to once an hour; never while queued.
    const now = Date.now();
    for (const w of resp.wantedSymbols) {
      const u = this.uploaded.get(w);
      if (u && (u.queued || !opt.reuploadAfter ||
        now - u.at < Math.min(opt.reuploadAfter * 2 ** (u.n - 1), Math.max(opt.reuploadAfter, 3600)) * 1000)) continue;
      if (u) { u.queued = true; stats.reuploads++; } else this.uploaded.set(w, { n: 0, at: 0, queued: true });
      this.uploads.push(w);
    }
    return true;
  }

  async sendUpload(hex) {
    const e = exeByHex.get(hex), k = kernelByHex.get(hex);
    let table;
    if (e) table = P.symbolTable(e.exe.id, W.symbolsFor(e.exe.fileName, false));
    else if (k) table = P.symbolTable(k.k.id, null, '', kernelTableBody(k.k));
    else table = P.symbolTable(Buffer.from(hex, 'hex'), [], 'executable no longer mapped');
    const r = await this.sendUntilAnswered(compress(Buffer.concat([P.requestHead(this.instance, ++this.seq, opt.hz), table])));
    if (r && r.status === 200) stats.uploads++;
    else stats.uploadsFailed++;
    const u = this.uploaded.get(hex);
    if (u && r) Object.assign(u, { n: u.n + 1, at: Date.now(), queued: false });
    return !!r;
  }

  async pump() {
    if (this.busy) return;
    this.busy = true;
    try {
      for (;;) {
        if (Date.now() >= this.restartAt && !stopping) {
          stats.restarts++;
          this.newInstance();
        }
        if (this.queue.length) {
          const item = this.queue[0];
          const done = await this.sendItem(item);
          if (!done) break;
          if (this.queue[0] === item) this.queue.shift();
          else this.queue.splice(this.queue.indexOf(item), 1);
        } else if (this.uploads.length) {
          if (!(await this.sendUpload(this.uploads[0]))) break;
          this.uploads.shift();
        } else break;
      }
    } finally {
      this.busy = false;
    }
  }

  buffered() { return this.queue.reduce((a, it) => a + it.taken, 0); }
}

// The scratch buffer requests are assembled in (grown, never shrunk), and their compression: synchronous, as a
// stream per request costs more in allocation and GC than the deflate itself at level 1.
let scratchBuf = Buffer.alloc(0);
let encodeStamp = 0;
// Upper bounds of a sample beside its process's fields, and of a stack's definition (≤ 37 frames of ≤ 48 bytes).
const SAMPLE_MAX = 96, STACK_DEF_MAX = 28 + 40 * 48;
function scratch(n) {
  if (scratchBuf.length < n) scratchBuf = Buffer.allocUnsafe(Math.max(n, 2 * scratchBuf.length));
  return scratchBuf;
}
function compress(body) {
  return opt.gzip ? zlib.gzipSync(body, { level: 1 }) : Buffer.from(body);
}

function post(session, body, headers) {
  return new Promise((resolve, reject) => {
    const req = session.request({ ':method': 'POST', ':path': '/stackrelay.v1.Ingest/Push',
      'content-type': 'application/x-protobuf', ...headers });
    const chunks = [];
    let status = 0, hdrs = {};
    const timer = setTimeout(() => { req.close(http2.constants.NGHTTP2_CANCEL); reject(new Error('timeout')); },
      opt.timeout * 1000);
    req.on('response', (h) => { status = h[':status']; hdrs = h; });
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => { clearTimeout(timer); if (status) resolve({ status, headers: hdrs, body: Buffer.concat(chunks) }); else reject(new Error('no response')); });
    req.on('error', (e) => { clearTimeout(timer); reject(e); });
    req.end(body);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let stopping = false, flushDeadline = Infinity;

function snapshot(nodes) {
  const buffered = nodes.reduce((a, n) => a + n.buffered(), 0);
  const lat = latencies;
  latencies = [];
  return { ...stats, buffered, latencies: lat, t: Date.now(), stackCache: stackCache.size,
    rssBytes: process.memoryUsage().rss };
}

async function main() {
  const nodes = [];
  for (let i = 0; i < opt.nodes; i++) nodes.push(new SimNode(opt.firstNode + i));
  const start = Date.now();
  const end = start + opt.duration * 1000;
  process.stdout.write('stats ' + JSON.stringify(snapshot(nodes)) + '\n');
  // Windows of the nodes are spread evenly over the window length.
  const timers = nodes.map((n, i) => {
    const first = start + ((i + 0.5) / nodes.length) * opt.window * 1000;
    const tick = () => {
      if (stopping) return;
      const now = Date.now();
      n.takeWindow(now);
      const next = first + Math.ceil((now - first + 1) / (opt.window * 1000)) * opt.window * 1000;
      if (next + 0 <= end) n.timer = setTimeout(tick, next - Date.now());
    };
    n.timer = setTimeout(tick, first - Date.now());
    return n;
  });
  const statsTimer = setInterval(() => {
    sweepStacks();
    process.stdout.write('stats ' + JSON.stringify(snapshot(nodes)) + '\n');
  }, opt.statsEvery * 1000);
  const stop = () => {
    if (stopping) return;
    stopping = true;
    flushDeadline = Date.now() + opt.flushTimeout * 1000;
    for (const n of timers) clearTimeout(n.timer);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  while (!stopping && Date.now() < end) await sleep(Math.min(1000, Math.max(1, end - Date.now())));
  stop();
  // Flush: wait until every queue is empty or the deadline.
  while (Date.now() < flushDeadline) {
    for (const n of nodes) n.pump();
    if (nodes.every((n) => !n.queue.length && !n.uploads.length && !n.busy)) break;
    await sleep(200);
  }
  for (const n of nodes) {
    stats.dropped.flush_timeout += n.buffered();
    for (const it of n.queue) if (it.unknown || it.inFlight) stats.flushInDoubt += it.taken;
    n.queue = [];
    n.dropSession();
  }
  clearInterval(statsTimer);
  process.stdout.write('final ' + JSON.stringify(snapshot(nodes)) + '\n');
  process.exit(0);
}

// --census M: no gateway, no traffic: the fleet's processes churn through M minutes of windows in virtual time,
// and every 5 minutes the working set a gateway must hold to keep up is printed: the distinct stacks in the
// nodes' pools (each is sampled within a minute or so), the distinct locations (executable or kernel space,
// address) they name, and the executables.
function census() {
  const nodes = [];
  for (let i = 0; i < opt.nodes; i++) nodes.push(new SimNode(opt.firstNode + i, opt.epoch));
  for (let w = 1; w <= (opt.census * 60) / opt.window; w++) {
    const now = opt.epoch + w * opt.window * 1000;
    for (const n of nodes) n.churn(now);
    if ((w * opt.window) % 300) continue;
    const stacks = new Set(), locations = new Set(), exes = new Set();
    let frames = 0;
    for (const n of nodes)
      for (const pr of n.procs)
        for (const s of pr.stacks) {
          if (stacks.has(s.hex)) continue;
          stacks.add(s.hex);
          for (const f of framesOf(s.i, s.v, s.t, s.kernel).frames) {
            const space = f.hex || f.exe.toString('hex');
            if (f.kind === 1) exes.add(space);
            locations.add(space + ':' + f.address);
            frames++;
          }
        }
    sweepStacks();
    process.stdout.write('census ' + JSON.stringify({ minute: (w * opt.window) / 60, stacks: stacks.size,
      locations: locations.size, executables: exes.size, framesPerStack: +(frames / stacks.size).toFixed(2) }) + '\n');
  }
}

if (opt.census) census();
else main().catch((e) => { console.error(e.stack || e); process.exit(2); });
