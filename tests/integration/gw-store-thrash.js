#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// A stacks store too small for the stacks agents use (docs/gateway.md,
// "Definition stores"): two real gateways get the same traffic from an
// agent-like client (samples by stack ID, definitions resent when listed
// missing). The one whose stacks store holds a tenth of the stacks thrashes
// and must say so in its log, with the figures; the one with the default
// store must not. Both accept every sample (thrash costs CPU, not data).
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const L = require('./gw-lib.js');

const N_STACKS = 600;

// One agent: each round sends a sample of every stack; definitions only for the stacks the gateway said it lacks.
class Agent {
  constructor(gw, world) {
    this.gw = gw;
    this.world = world;
    this.instance = crypto.randomBytes(16);
    this.seq = 0;
    this.sent = 0;
    this.accepted = 0;
    this.missingRounds = 0;
  }

  samples(stacks) {
    return stacks.map((s, i) => ({ stackId: s.id, pid: 1000, tid: 2000 + (i % 4), processName: 'app', count: 1,
      executablePath: '/usr/bin/app', start: 1700000000000000000n, end: 1700000001000000000n }));
  }

  async round() {
    let todo = this.world.stacks, defs = [];
    this.sent += todo.length;
    for (let attempt = 0; attempt < 5 && todo.length; attempt++) {
      const r = await L.push(this.session, { instanceId: this.instance, sequence: ++this.seq, stacks: defs,
        executables: defs.length ? this.world.exes : [], samples: this.samples(todo) });
      assert.equal(r.status, 200, JSON.stringify(r.response));
      this.accepted += r.response.accepted;
      const missing = new Set(r.response.missingStacks);
      todo = todo.filter((s) => missing.has(s.id.toString('hex')));
      defs = todo;
      if (todo.length) this.missingRounds++;
    }
    assert.equal(todo.length, 0, 'stacks still missing after 5 resends');
  }
}

(async () => {
  const dir = L.tmpdir('gw-thrash');
  const world = L.makeWorld(N_STACKS, { nExes: 4 });
  let sink, small, big, failed = 0;
  try {
    sink = await L.startSink();
    [small, big] = await Promise.all([
      L.startGateway(L.agentGatewayYaml(sink.url, 'stores: {stacks: 64KiB, locations: 64KiB}'), dir),
      L.startGateway(L.agentGatewayYaml(sink.url), dir),
    ]);
    const agents = [new Agent(small, world), new Agent(big, world)];
    for (const a of agents) a.session = await L.connect(`http://${a.gw.agentAddress}`);
    const warned = /the stacks store is too small for the stacks agents use/;
    // The receiver weighs 10-second windows, the first from its first tick: at least 12 s of traffic.
    const t0 = Date.now();
    while (Date.now() - t0 < 12000 || (!warned.test(small.log()) && Date.now() - t0 < 40000))
      await Promise.all(agents.map((a) => a.round()));

    const checks = [
      ['the small store thrashes and the gateway says so, with its figures', () => {
        assert.ok(agents[0].missingRounds > 10, `only ${agents[0].missingRounds} rounds with missing stacks`);
        const line = small.log().split('\n').find((l) => warned.test(l));
        assert.ok(line, 'no warning in the log');
        assert.match(line, /level=warn/);
        assert.match(line, /missing_stacks=\d+ stack_evictions=\d+ stacks_store_bytes=\d+ stacks_store_limit_bytes=65536/);
        assert.equal(small.log().split('\n').filter((l) => warned.test(l)).length, 1, 'warned more than once');
      }],
      ['a store that holds the stacks stays quiet', () => {
        assert.equal(agents[1].missingRounds, 1, 'only the first round lacks definitions');
        assert.doesNotMatch(big.log(), warned);
      }],
      ['both accept every sample: thrash costs CPU, not data', () => {
        for (const a of agents) assert.equal(a.accepted, a.sent);
      }],
    ];
    failed += L.runChecks(checks);
    for (const a of agents) a.session.close();
  } catch (e) {
    failed++;
    console.log(`not ok - setup or traffic: ${e.stack || e}`);
  } finally {
    for (const g of [small, big]) if (g) await L.stopGateway(g).catch(() => {});
    if (sink) sink.srv.close();
  }
  if (failed && small) console.log(small.log().split('\n').slice(-20).join('\n'));
  process.exit(failed ? 1 : 0);
})();
