#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// Conservation through replicas, resets and restarts. A test agent written
// here (Node, independent of the C agent) sends a known multiset of samples
// the way docs/agent-protocol.md says: definitions once, `missing_*`
// answered by a resend (new sequence) with the definitions, a request whose
// answer was lost resent with the same sequence and the same bytes.
//
//  A. Two gateways behind a round-robin TCP proxy (written here), one
//     connection per request: the replica that did not see a definition asks
//     for it, negotiation converges, and the two replicas together accept
//     and export exactly what was sent.
//  B. One gateway behind a proxy that cuts connections at random, sometimes
//     after the request went through and before the answer came back (a lost
//     response), and a graceful gateway restart in the middle: after
//     resends, exactly what was sent is exported once (de-duplication on the
//     replica, missing definitions again after the restart).
//
// The gateway is gw-harness (the real runtime and agent receiver, exporter
// test_count), which prints its accounting when it exits.
'use strict';

const assert = require('node:assert/strict');
const net = require('node:net');
const { freePort } = require('./ports.js');
const crypto = require('node:crypto');
const L = require('./gw-lib.js');

const harness = process.env.SR_GW_HARNESS;
if (!harness) { console.log('SKIP: SR_GW_HARNESS not set'); process.exit(77); }

// Seeded PRNG so a failure can be replayed.
let rngState = Number(process.env.SEED || 12345);
function rnd() {
  rngState = (rngState * 1103515245 + 12345) % 2147483648;
  return rngState / 2147483648;
}

// A TCP proxy: each accepted connection goes to the next upstream (round robin).
// faults.p: probability that a connection is cut when an answer (HTTP/2 HEADERS) comes back
// (the gateway processed the request; the client never sees the answer).
function startProxy(upstreams, faults = { p: 0 }) {
  let next = 0;
  const stats = { connections: 0, cut: 0 };
  const srv = net.createServer((client) => {
    stats.connections++;
    const [host, port] = L.splitAddress(upstreams[next++ % upstreams.length]);
    const up = net.connect(port, host);
    // Parse the gateway's HTTP/2 frames (9-byte header: length, type, flags, stream) to find the
    // first HEADERS frame (type 1): the answer to a request the gateway has processed.
    let pending = Buffer.alloc(0), cut = false;
    client.on('data', (d) => up.write(d));
    up.on('data', (d) => {
      if (cut) return;
      if (!faults.p) return void client.write(d);
      pending = Buffer.concat([pending, d]);
      let off = 0;
      while (pending.length - off >= 9) {
        const len = pending.readUIntBE(off, 3), type = pending[off + 3];
        if (type === 1 && rnd() < faults.p) {
          cut = true;
          stats.cut++;
          if (off) client.write(pending.subarray(0, off));
          client.destroy();
          up.destroy();
          return;
        }
        if (pending.length - off < 9 + len) break;
        off += 9 + len;
      }
      if (off) client.write(pending.subarray(0, off));
      pending = pending.subarray(off);
    });
    const end = () => { client.destroy(); up.destroy(); };
    client.on('error', end);
    up.on('error', end);
    client.on('close', end);
    up.on('close', end);
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () =>
    resolve({ srv, stats, address: `127.0.0.1:${srv.address().port}`, setUpstreams(u) { upstreams = u; } })));
}

// The test agent. world: definitions; work: [{stack index, count}] to send.
class TestAgent {
  constructor(world, proxyAddress, opts = {}) {
    this.world = world;
    this.address = proxyAddress;
    this.instance = crypto.randomBytes(16);
    this.seq = 0;
    this.sentDefs = new Set();  // stacks the agent believes the gateway has
    this.accepted = 0;
    this.resends = 0;
    this.missingRounds = 0;
    this.newConnectionPerRequest = opts.newConnectionPerRequest;
    this.session = null;
  }

  async conn() {
    if (this.session && !this.session.closed && !this.session.destroyed && !this.newConnectionPerRequest)
      return this.session;
    if (this.session) this.session.destroy();
    this.session = await L.connect(`http://${this.address}`);
    this.session.on('error', () => {});
    return this.session;
  }

  defsFor(stackIdx, all) {
    const stacks = [], exes = new Map();
    for (const i of new Set(stackIdx)) {
      if (!all && this.sentDefs.has(i)) continue;
      stacks.push(this.world.stacks[i]);
      for (const f of this.world.stacks[i].frames)
        exes.set(f.exe.toString('hex'), this.world.exes.find((e) => e.id.equals(f.exe)));
    }
    return { stacks, executables: [...exes.values()] };
  }

  // Sends one request until it has an answer (same sequence, same bytes on every retry).
  async sendUntilAnswered(samples, defs) {
    const req = { instanceId: this.instance, sequence: ++this.seq, ...defs,
      samples: samples.map((s, k) => ({ stackId: this.world.stacks[s.stack].id, pid: 1, tid: k, count: s.count,
        processName: 'app' })) };
    const body = L.encodePushRequest(req);
    for (let attempt = 0; attempt < 200; attempt++) {
      try {
        const s = await this.conn();
        const r = await L.post(s, body, {}, 5000);
        if (r.status === 200) return L.decodePushResponse(r.body);
        if (r.status !== 503 && r.status !== 429 && r.status !== 0)
          throw new Error(`unexpected status ${r.status}: ${L.decodePushResponse(r.body).error}`);
      } catch (e) {
        if (/unexpected status/.test(e.message)) throw e;
      }
      // No answer: reconnect and resend the same bytes.
      this.resends++;
      if (this.session) { this.session.destroy(); this.session = null; }
      await new Promise((r) => setTimeout(r, 20 + 30 * rnd()));
    }
    throw new Error('no answer after 200 attempts');
  }

  async send(samples) {
    let todo = samples, all = false;
    for (let round = 0; todo.length; round++) {
      if (round > 3) throw new Error('missing definitions did not converge in 3 resends');
      const defs = this.defsFor(todo.map((s) => s.stack), all);
      const resp = await this.sendUntilAnswered(todo, defs);
      for (const i of todo.map((s) => s.stack)) this.sentDefs.add(i);
      const missing = new Set(resp.missingStacks);
      const refused = todo.filter((s) => missing.has(this.world.stacks[s.stack].id.toString('hex')));
      const expected = todo.reduce((a, s) => a + s.count, 0) - refused.reduce((a, s) => a + s.count, 0);
      assert.equal(resp.accepted, expected, `accepted_samples ${resp.accepted}, expected ${expected}`);
      this.accepted += resp.accepted;
      if (refused.length) this.missingRounds++;
      todo = refused;
      all = true; // a resend carries every definition its samples need
    }
  }
}

function makeWork(world, nRequests, perRequest) {
  const reqs = [];
  let total = 0;
  for (let r = 0; r < nRequests; r++) {
    const samples = [];
    for (let k = 0; k < perRequest; k++) {
      const c = 1 + Math.floor(rnd() * 5);
      samples.push({ stack: Math.floor(rnd() * world.stacks.length), count: c });
      total += c;
    }
    reqs.push(samples);
  }
  return { reqs, total };
}

function exported(log) {
  const m = /accounting component=test_count received=(\d+) accepted=\d+ refused=\d+ dropped=(\d+) exported=(\d+)/.exec(log);
  assert.ok(m, log);
  assert.equal(Number(m[2]), 0);
  return Number(m[3]);
}

const yaml = (port) => `
receivers:
  agent: {endpoint: 127.0.0.1:${port}}
exporters:
  test_count: {}
service:
  pipelines:
    profiles: {receivers: [agent], exporters: [test_count]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
`;

(async () => {
  const dir = L.tmpdir('gw-conservation');
  let failed = 0;
  const gws = [];
  const step = async (name, fn) => {
    try { await fn(); console.log(`ok - ${name}`); } catch (e) {
      failed++;
      console.log(`not ok - ${name}\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
      for (const g of gws) console.log(g.log().split('\n').slice(-15).join('\n'));
    }
  };

  await step('A: two replicas behind a round-robin proxy converge and count once', async () => {
    const world = L.makeWorld(40, { nExes: 6, salt: 'A' });
    const a = await L.startGateway(yaml(0), dir, [], harness);
    const b = await L.startGateway(yaml(0), dir, [], harness);
    gws.push(a, b);
    const proxy = await startProxy([a.agentAddress, b.agentAddress]);
    const agent = new TestAgent(world, proxy.address, { newConnectionPerRequest: true });
    const { reqs, total } = makeWork(world, 60, 8);
    for (const r of reqs) await agent.send(r);
    assert.equal(agent.accepted, total);
    assert.ok(agent.missingRounds > 0, 'the second replica never asked for a definition?');
    const ma = await L.metrics(a.metricsAddress), mb = await L.metrics(b.metricsAddress);
    const acc = ma.get('stackrelay_gateway_samples_accepted_total', { component: 'agent' }) +
      mb.get('stackrelay_gateway_samples_accepted_total', { component: 'agent' });
    assert.equal(acc, total);
    for (const m of [ma, mb]) {
      assert.ok(m.get('stackrelay_gateway_samples_accepted_total', { component: 'agent' }) > 0, 'one replica got nothing');
      assert.equal(m.get('stackrelay_gateway_samples_received_total', { component: 'agent' }),
        m.get('stackrelay_gateway_samples_accepted_total', { component: 'agent' }) +
        m.get('stackrelay_gateway_samples_refused_total', { component: 'agent' }));
    }
    agent.session?.destroy();
    proxy.srv.close();
    assert.equal(await L.stopGateway(a), 0);
    assert.equal(await L.stopGateway(b), 0);
    assert.equal(exported(a.log()) + exported(b.log()), total);
    console.log(`# A: ${total} CPU samples in ${reqs.length} requests, ${agent.missingRounds} missing-definition rounds, ` +
      `${proxy.stats.connections} connections`);
    gws.length = 0;
  });

  await step('B: connection cuts, lost answers and a gateway restart: exactly once', async () => {
    const world = L.makeWorld(30, { nExes: 5, salt: 'B' });
    // A fixed port, so the restarted gateway takes over behind the proxy.
    const port = await freePort();
    let g1 = await L.startGateway(yaml(port), dir, [], harness);
    gws.push(g1);
    const proxy = await startProxy([g1.agentAddress], { p: 0.3 });
    const agent = new TestAgent(world, proxy.address);
    const { reqs, total } = makeWork(world, 80, 6);
    for (let i = 0; i < 40; i++) await agent.send(reqs[i]);
    // Graceful restart: in-flight requests finish, the stores start empty.
    assert.equal(await L.stopGateway(g1), 0);
    const first = exported(g1.log());
    const g2 = await L.startGateway(yaml(port), dir, [], harness);
    gws.push(g2);
    for (let i = 40; i < reqs.length; i++) await agent.send(reqs[i]);
    const m = await L.metrics(g2.metricsAddress);
    const dups = m.get('stackrelay_gateway_agent_duplicate_requests_total');
    agent.session?.destroy();
    proxy.srv.close();
    assert.equal(await L.stopGateway(g2), 0);
    const second = exported(g2.log());
    assert.equal(agent.accepted, total);
    assert.equal(first + second, total, `exported ${first} + ${second}, sent ${total}`);
    assert.ok(proxy.stats.cut > 0, 'no connection was cut');
    console.log(`# B: ${total} CPU samples, ${proxy.stats.cut} answers lost, ${agent.resends} resends, ` +
      `${dups} duplicates caught after the restart, ${agent.missingRounds} missing rounds`);
    gws.length = 0;
  });

  for (const g of gws) await L.stopGateway(g).catch(() => {});
  process.exit(failed ? 1 : 0);
})();
