#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// An executables store too small for the executables agents use
// (docs/gateway.md, "Definition stores"): an agent-like client defines new
// stacks every round, cycling over 1,000 executables, and sends an
// executable's definition only on its first use and when the gateway lists it
// missing, as the agent does. The executables that stored locations name are
// held, never evicted; the others are what the executables store bounds. A
// gateway whose stacks and locations stores hold a few rounds, and whose
// executables store holds about a fifth of the executables, lets go of them
// rounds before the cycle comes back to them, evicts them, asks for them
// again, and must say so in its log with the figures; one with the default
// stores must not. Both accept every sample.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const L = require('./gw-lib.js');

const N_EXES = 1000;
const STACKS_PER_ROUND = 100;
// A round names a window of 60 executables (about 20 KiB of definitions, which fit the small store), the next
// round's window 40 further on: over 25 rounds all 1,000 (about 330 KiB), which do not.
const WINDOW = 60, STEP = 40;

const exes = Array.from({ length: N_EXES }, (_, i) => ({ id: L.id('thrash-exe', i, 20), idKind: 1, fileName: `bin${i}`,
  path: `/usr/bin/bin${i}`, fileSize: 1000 + i }));
const exeByHex = new Map(exes.map((e) => [e.id.toString('hex'), e]));

class Agent {
  constructor(gw) {
    this.gw = gw;
    this.instance = crypto.randomBytes(16);
    this.seq = 0;
    this.round_ = 0;
    this.known = new Set(); // executables defined on this connection
    this.sent = 0;
    this.accepted = 0;
    this.missingExes = 0;
  }

  // New stacks every round, each naming three executables of the round's window.
  stacks() {
    const out = [];
    const base = this.round_ * STEP;
    for (let i = 0; i < STACKS_PER_ROUND; i++) {
      const k = this.round_ * STACKS_PER_ROUND + i;
      const frames = [0, 1, 2].map((d) => ({ exe: exes[(base + (i * 7 + d * 23) % WINDOW) % N_EXES].id,
        address: 0x1000 + (k % 4096) * 16 + d, kind: 1 }));
      out.push({ id: L.id('thrash-stack', k), frames });
    }
    this.round_++;
    return out;
  }

  async round() {
    let todo = this.stacks(), extra = [];
    this.sent += todo.length;
    for (let attempt = 0; attempt < 5 && todo.length; attempt++) {
      const defsExes = [...extra];
      for (const s of todo)
        for (const f of s.frames) {
          const h = f.exe.toString('hex');
          if (!this.known.has(h)) { this.known.add(h); defsExes.push(exeByHex.get(h)); }
        }
      const samples = todo.map((s) => ({ stackId: s.id, pid: 1000, tid: 2000, processName: 'app', count: 1,
        executablePath: '/usr/bin/app', start: 1700000000000000000n, end: 1700000001000000000n }));
      const r = await L.push(this.session, { instanceId: this.instance, sequence: ++this.seq, stacks: todo,
        executables: defsExes, samples });
      assert.equal(r.status, 200, JSON.stringify(r.response));
      this.accepted += r.response.accepted;
      this.missingExes += r.response.missingExecutables.length;
      extra = r.response.missingExecutables.map((h) => exeByHex.get(h)).filter(Boolean);
      const missing = new Set(r.response.missingStacks);
      todo = todo.filter((s) => missing.has(s.id.toString('hex')));
    }
    assert.equal(todo.length, 0, 'stacks still missing after 5 resends');
  }
}

(async () => {
  const dir = L.tmpdir('gw-thrash-exe');
  let sink, small, big, failed = 0;
  try {
    sink = await L.startSink();
    [small, big] = await Promise.all([
      L.startGateway(L.agentGatewayYaml(sink.url, 'stores: {executables: 64KiB, stacks: 64KiB, locations: 64KiB}'), dir),
      L.startGateway(L.agentGatewayYaml(sink.url), dir),
    ]);
    const agents = [new Agent(small), new Agent(big)];
    for (const a of agents) a.session = await L.connect(`http://${a.gw.agentAddress}`);
    const warned = /the executables store is too small for the executables agents use/;
    // The receiver weighs 10-second windows, the first from its first tick: at least 12 s of traffic.
    const t0 = Date.now();
    while (Date.now() - t0 < 12000 || (!warned.test(small.log()) && Date.now() - t0 < 40000))
      await Promise.all(agents.map((a) => a.round()));

    const checks = [
      ['the small store evicts executables agents use again and the gateway says so, with its figures', () => {
        assert.ok(agents[0].missingExes >= 10, `only ${agents[0].missingExes} executables asked for again`);
        const line = small.log().split('\n').find((l) => warned.test(l));
        assert.ok(line, 'no warning in the log');
        assert.match(line, /level=warn/);
        assert.match(line, /missing_executables=\d+ executable_evictions=\d+ executables_store_bytes=\d+ executables_store_limit_bytes=65536/);
        assert.equal(small.log().split('\n').filter((l) => warned.test(l)).length, 1, 'warned more than once');
      }],
      ['a store that holds the executables stays quiet', () => {
        assert.equal(agents[1].missingExes, 0);
        assert.doesNotMatch(big.log(), /store is too small/);
      }],
      ['both accept every sample', () => {
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
