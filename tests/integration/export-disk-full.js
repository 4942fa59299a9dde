#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// A full disk under the persistent sending queue (docs/exporters.md, "A full
// or failing disk"; docs/security.md, same section). The real gateway
// (agent receiver → batch → otlp_http with sending_queue.storage on a small
// tmpfs) takes pushes from a test agent (gw-lib.js; it keeps a refused
// request and resends it after retry_after_ms, as the agent does) while the
// backend (tests/fakes/fake_pyroscope.py) is down, so the queue fills the
// disk:
//
//  1. The disk fills (a ballast file leaves little room): the gateway answers
//     429 "retry later" with Retry-After naming the disk (and so does its
//     otlp receiver: HTTP 429 + Retry-After, gRPC UNAVAILABLE), counts the
//     refusals by reason, holds in memory what it had taken, drops nothing.
//  2. Space freed (the ballast deleted): the probe takes the disk back
//     within disk_check_interval, and pushes are accepted again.
//  3. Full again, then the backend comes up: delivering the queue frees the
//     disk, the gateway accepts again, and every sample any push was told
//     was accepted reaches the backend (sum accepted = sum at the fake).
//
// Needs root (mount -t tmpfs): suite 'root', else exit 77.
'use strict';

const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const crypto = require('node:crypto');
const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const L = require('./gw-lib.js');
const { freePort } = require('./ports.js');

if (process.getuid() !== 0) {
  console.log('SKIP: needs root to mount a tmpfs for the disk queue');
  process.exit(77);
}

const TMPFS_MIB = 4;
const ROOM_KIB = 160; // what the ballast leaves: a few requests
const CHECK_MS = 200; // sending_queue.disk_check_interval

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-export-disk-full-'));
const queueDir = path.join(work, 'queue');
const ballast = path.join(queueDir, 'ballast');
let mounted = false;
process.on('exit', () => {
  if (mounted) try { execFileSync('umount', ['-l', queueDir]); } catch (e) { /* reported by the test */ }
  if (!process.env.KEEP_TMP) fs.rmSync(work, { recursive: true, force: true });
});

// Fills the tmpfs but for `room` bytes (0: remove the ballast).
function fillDisk(room) {
  fs.rmSync(ballast, { force: true });
  if (!room) return;
  const st = fs.statfsSync(queueDir);
  const free = st.bavail * st.bsize;
  const fd = fs.openSync(ballast, 'w');
  const chunk = Buffer.alloc(64 * 1024, 0x5a);
  for (let left = Math.max(free - room, 0); left > 0; left -= chunk.length)
    fs.writeSync(fd, chunk, 0, Math.min(left, chunk.length));
  fs.closeSync(fd);
}

function startPyroscope(port) {
  const portFile = path.join(work, 'pyroscope.port');
  const proc = spawn('python3', [path.join(process.env.SR_SOURCE_ROOT, 'tests/fakes/fake_pyroscope.py'),
    '--port', String(port), '--port-file', portFile, '--lifetime', '110'], { stdio: ['ignore', 'inherit', 'inherit'] });
  return L.waitFor(() => fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').trim(), 10000,
    'fake pyroscope').then(() => ({ proc, address: `127.0.0.1:${port}` }));
}

// The test agent: requests of `perRequest` samples over a world of stacks, each with the definitions it uses
// (so the gateway never asks for any); a refused request is kept and resent, same sequence and bytes.
class Sender {
  constructor(world, address) {
    this.world = world;
    this.address = address;
    this.instance = crypto.randomBytes(16);
    this.seq = 0;
    this.accepted = 0;
    this.refusals = [];
    this.pending = null; // the request a 429 gave back
  }

  async conn() {
    if (!this.session || this.session.closed || this.session.destroyed) {
      this.session = await L.connect(`http://${this.address}`);
      this.session.on('error', () => {});
    }
    return this.session;
  }

  next(perRequest) {
    const samples = [];
    for (let i = 0; i < perRequest; i++) {
      const k = (this.seq * perRequest + i) % this.world.stacks.length;
      samples.push({ stackId: this.world.stacks[k].id, pid: 100 + (k % 7), tid: 1000 + i, processName: 'app',
        count: 1 + (i % 3) });
    }
    const stacks = [...new Set(samples.map((s) => s.stackId.toString('hex')))]
      .map((h) => this.world.stacks.find((s) => s.id.toString('hex') === h));
    return { instanceId: this.instance, sequence: ++this.seq, stacks, executables: this.world.exes, samples };
  }

  // One push (the pending one first); returns the answer's status. Accepted samples are counted.
  async push(perRequest = 300) {
    const req = this.pending || this.next(perRequest);
    const r = await L.push(await this.conn(), req);
    if (r.status === 200) {
      this.pending = null;
      this.accepted += r.response.accepted;
      assert.equal(r.response.error, '');
      assert.equal(r.response.missingStacks.length, 0);
    } else if (r.status === 429) {
      this.pending = req;
      this.refusals.push({ retryAfter: r.headers['retry-after'], ms: r.response.retryAfterMs, error: r.response.error });
    } else {
      throw new Error(`unexpected status ${r.status}: ${r.response.error}`);
    }
    return r.status;
  }
}

// An empty OTLP/JSON request to the otlp receiver's HTTP port: {status, retryAfter, body}.
function otlpHttp(port) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1development/profiles',
      headers: { 'content-type': 'application/json' }, timeout: 10000 }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'], body }));
    });
    req.on('error', reject);
    req.end('{"resourceProfiles":[]}');
  });
}

// An empty Export over gRPC (HTTP/2, one 5-byte frame): {status, message} from headers or trailers.
async function otlpGrpc(port) {
  const session = await L.connect(`http://127.0.0.1:${port}`);
  try {
    return await new Promise((resolve, reject) => {
      const req = session.request({ ':method': 'POST', 'content-type': 'application/grpc', te: 'trailers',
        ':path': '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export' });
      let st = {};
      const take = (h) => { if (h['grpc-status'] !== undefined) st = { status: Number(h['grpc-status']), message: h['grpc-message'] }; };
      req.on('response', take);
      req.on('trailers', take);
      req.on('data', () => {});
      req.on('end', () => resolve(st));
      req.on('error', reject);
      req.end(Buffer.alloc(5));
    });
  } finally {
    session.close();
  }
}

async function metric(g, name, labels) {
  return (await L.metrics(g.metricsAddress)).get(name, labels);
}

(async () => {
  let gw, pyro, failed = 0;
  const figures = {};
  try {
    fs.mkdirSync(queueDir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_MIB}m,mode=0700`, 'tmpfs', queueDir]);
    mounted = true;
    const portPyroscope = await freePort(); // nothing listens there until step 3
    const portOtlpHttp = await freePort(), portOtlpGrpc = await freePort();
    gw = await L.startGateway(`
receivers:
  agent: {endpoint: 127.0.0.1:0}
  otlp: {protocols: {http: {endpoint: 127.0.0.1:${portOtlpHttp}}, grpc: {endpoint: 127.0.0.1:${portOtlpGrpc}}}}
processors:
  batch: {timeout: 100ms}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:${portPyroscope}
    compression: none
    retry_on_failure: {initial_interval: 100ms, max_interval: 300ms, max_elapsed_time: 0s}
    sending_queue: {storage: ${queueDir}/q, queue_size_mib: 64, disk_check_interval: ${CHECK_MS}ms}
service:
  pipelines:
    profiles: {receivers: [agent, otlp], processors: [batch], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
  shutdown_timeout: 5s
`, work);
    const sender = new Sender(L.makeWorld(600, { nExes: 8 }), gw.agentAddress);
    const checks = [];
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    // Pushes until the gateway refuses; what it gives back waits retry_after_ms, as an agent would.
    const pushUntilRefused = async (what) => {
      for (let i = 0; i < 2000; i++) {
        if (await sender.push() === 429) return;
        await sleep(20);
      }
      throw new Error(`never refused (${what})`);
    };
    const pushUntilAccepted = async (what) => {
      await L.waitFor(async () => {
        if (await sender.push() === 200) return true;
        await sleep(Math.min(sender.refusals.at(-1).ms, 1000));
        return false;
      }, 30000, what);
    };

    // 1. The disk fills.
    fillDisk(ROOM_KIB * 1024);
    await pushUntilRefused('disk full');
    const first = sender.refusals.at(-1);
    const acceptedBeforeFull = sender.accepted;
    // Whatever the pipeline held when the disk failed is held in memory, not dropped.
    await L.waitFor(async () => (await metric(gw, 'stackrelay_gateway_export_queue_disk_refusing')) === 1, 10000,
      'the refusing gauge');
    figures.heldRequests = await metric(gw, 'stackrelay_gateway_export_queue_held_requests');
    figures.heldBytes = await metric(gw, 'stackrelay_gateway_export_queue_held_bytes');
    // New data keeps being refused while the disk cannot take it (two check intervals and more).
    for (let i = 0; i < 3; i++) {
      assert.equal(await sender.push(), 429);
      await sleep(CHECK_MS);
    }
    const oh = await otlpHttp(portOtlpHttp), og = await otlpGrpc(portOtlpGrpc);
    const m1 = await L.metrics(gw.metricsAddress);
    checks.push(['disk full: 429 with Retry-After and retry_after_ms, naming the disk', () => {
      assert.ok(Number(first.retryAfter) >= 1, JSON.stringify(first));
      assert.ok(first.ms >= 1000, JSON.stringify(first));
      assert.match(first.error, /cannot write its queue to disk \(No space left on device\); retry after \d+ ms/);
    }]);
    checks.push(['the otlp receiver too: HTTP 429 with Retry-After, gRPC UNAVAILABLE, naming the disk', () => {
      assert.equal(oh.status, 429, JSON.stringify(oh));
      assert.ok(Number(oh.retryAfter) >= 1, JSON.stringify(oh));
      assert.match(oh.body, /cannot write its queue to disk/);
      assert.equal(og.status, 14, JSON.stringify(og));
      assert.match(decodeURIComponent(og.message || ''), /cannot write its queue to disk/);
    }]);
    checks.push(['refusals counted by reason, the disk error counted, the gauge at 1', () => {
      assert.ok(m1.get('stackrelay_gateway_export_queue_refusals_total', { reason: 'no_space' }) >= 6);
      assert.ok(m1.get('stackrelay_gateway_export_queue_disk_errors_total', { reason: 'no_space' }) >= 1);
      assert.equal(m1.get('stackrelay_gateway_export_queue_refusals_total', { reason: 'queue_full' }), 0);
      assert.equal(m1.get('stackrelay_gateway_export_queue_disk_refusing'), 1);
      assert.ok(m1.get('stackrelay_gateway_samples_refused_total', { component: 'agent', reason: 'retry_later' }) > 0);
    }]);
    checks.push(['nothing taken is dropped while the disk is full', () => {
      assert.equal(m1.get('stackrelay_gateway_samples_dropped_total'), 0, m1.text.split('\n')
        .filter((l) => l.startsWith('stackrelay_gateway_samples_dropped_total')).join('\n'));
    }]);

    // 2. Space freed: the probe takes the disk back; pushes are accepted again.
    const freedAt = Date.now();
    fillDisk(0);
    await L.waitFor(async () => (await metric(gw, 'stackrelay_gateway_export_queue_disk_refusing')) === 0, 10000,
      'the disk taken back');
    figures.recoveredMs = Date.now() - freedAt;
    await pushUntilAccepted('accepted again after space was freed');
    checks.push(['space freed: the disk is taken back and pushes are accepted', () => {
      assert.ok(sender.accepted > acceptedBeforeFull);
    }]);
    const m2 = await L.metrics(gw.metricsAddress);
    checks.push(['what was held in memory is on disk now, nothing delivered yet', () => {
      assert.equal(m2.get('stackrelay_gateway_export_queue_held_requests'), 0);
      assert.equal(m2.get('stackrelay_gateway_samples_exported_total'), 0);
      assert.equal(m2.get('stackrelay_gateway_samples_dropped_total'), 0);
      assert.ok(m2.get('stackrelay_gateway_export_queue_samples') > 0, m2.text.split('\n')
        .filter((l) => /export_queue|samples_(received|exported|dropped)_total/.test(l) && !l.startsWith('#')).join('\n'));
    }]);

    // 3. Full again, then the backend comes up and drains the disk.
    fillDisk(ROOM_KIB * 1024);
    await pushUntilRefused('disk full again');
    pyro = await startPyroscope(portPyroscope);
    await pushUntilAccepted('accepted again once the backend drained the disk');
    for (let i = 0; i < 20; i++) await sender.push(); // more, while the backend is up
    while (sender.pending) {
      await sleep(sender.refusals.at(-1).ms);
      await sender.push();
    }
    const stats = async () => JSON.parse((await L.httpGet(pyro.address, '/stats')).body);
    await L.waitFor(async () => (await stats()).accepted_samples >= sender.accepted &&
      (await metric(gw, 'stackrelay_gateway_export_queue_samples')) === 0, 60000, 'the backend to get everything');
    const st = await stats();
    const m = await L.metrics(gw.metricsAddress);
    figures.accepted = sender.accepted;
    figures.delivered = st.accepted_samples;
    figures.requests = sender.seq;
    figures.refused = sender.refusals.length;
    figures.refusedNoSpace = m.get('stackrelay_gateway_export_queue_refusals_total', { reason: 'no_space' });
    figures.diskErrors = m.get('stackrelay_gateway_export_queue_disk_errors_total', { reason: 'no_space' });
    checks.push(['conservation: every sample accepted by the gateway is at the backend, once', () => {
      assert.equal(st.accepted_samples, sender.accepted);
      assert.equal(m.get('stackrelay_gateway_samples_exported_total', { component: 'otlp_http' }), sender.accepted);
      assert.equal(m.get('stackrelay_gateway_samples_dropped_total'), 0);
      assert.deepEqual(st.errors || [], []);
    }]);
    checks.push(['the queue is drained and the tmpfs holds no queue file', () => {
      assert.equal(fs.readdirSync(path.join(queueDir, 'q')).filter((f) => f.endsWith('.srq') || f.endsWith('.tmp'))
        .length, 0);
      assert.equal(m.get('stackrelay_gateway_export_queue_disk_refusing'), 0);
    }]);
    failed += L.runChecks(checks);
    sender.session?.close();
    const code = await L.stopGateway(gw);
    if (code !== 0) { failed++; console.log(`not ok - gateway exit status ${code}`); }
    console.log(`# ${figures.requests} requests, ${figures.accepted} samples accepted, ${figures.delivered} delivered; ` +
      `${figures.refused} pushes answered 429 (${figures.refusedNoSpace} requests counted no_space, otlp ones included), ` +
      `${figures.diskErrors} failed writes; held in memory when the disk filled: ${figures.heldRequests} requests, ` +
      `${figures.heldBytes} bytes; disk taken back ${figures.recoveredMs} ms after space was freed ` +
      `(disk_check_interval ${CHECK_MS} ms)`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${e.stack || e}`);
    if (gw) await L.stopGateway(gw).catch(() => {});
  } finally {
    if (pyro) pyro.proc.kill('SIGTERM');
  }
  if (failed && gw) console.log(gw.log().split('\n').slice(-40).join('\n'));
  process.exit(failed ? 1 : 0);
})();
