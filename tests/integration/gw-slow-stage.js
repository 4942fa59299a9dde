#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// A CPU-heavy stage must not block network I/O: with a processor that keeps
// every batch 1.5 s on a worker thread (test_slow in gw-harness), agents'
// requests are still answered at once, one after another and concurrently
// (each must be answered within 1 s, less than the stage's 1.5 s: a blocked
// loop could not answer in time; 12 requests in a row would need 18 s). Graceful shutdown then
// waits for the slow stage and everything accepted is exported (the
// harness prints the accounting). A stage slower than shutdown_timeout does
// not hold the exit.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const L = require('./gw-lib.js');

const harness = process.env.SR_GW_HARNESS;
if (!harness) { console.log('SKIP: SR_GW_HARNESS not set'); process.exit(77); }

const config = (delay, timeout) => `
receivers:
  agent: {endpoint: 127.0.0.1:0}
processors:
  test_slow: {delay: ${delay}}
exporters:
  test_count: {}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [test_slow], exporters: [test_count]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
  shutdown_timeout: ${timeout}
`;

(async () => {
  const dir = L.tmpdir('gw-slow');
  const world = L.makeWorld(4);
  const instance = crypto.randomBytes(16);
  let seq = 0, failed = 0, gw;
  const req = () => ({ instanceId: instance, sequence: ++seq, stacks: world.stacks, executables: world.exes,
    samples: world.stacks.map((s, i) => ({ stackId: s.id, pid: 1, tid: i, count: 2, processName: 'p' })) });
  const step = async (name, fn) => {
    try { await fn(); console.log(`ok - ${name}`); } catch (e) {
      failed++;
      console.log(`not ok - ${name}\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
    }
  };
  try {
    gw = await L.startGateway(config('1500ms', '30s'), dir, [], harness);
    const session = await L.connect(`http://${gw.agentAddress}`);
    let worst = 0, accepted = 0;
    await step('12 requests in a row are each answered while the stage is busy', async () => {
      const t0 = Date.now();
      for (let i = 0; i < 12; i++) {
        const t = Date.now();
        const r = await L.push(session, req(), { timeoutMs: 1000 });
        worst = Math.max(worst, Date.now() - t);
        assert.equal(r.status, 200);
        accepted += r.response.accepted;
      }
      console.log(`# sequential: 12 requests in ${Date.now() - t0} ms, slowest answer ${worst} ms (stage: 1500 ms per batch)`);
    });
    await step('24 concurrent requests are answered while the stage is busy', async () => {
      const t0 = Date.now();
      const rs = await Promise.all(Array.from({ length: 24 }, () => L.push(session, req(), { timeoutMs: 1000 })));
      for (const r of rs) { assert.equal(r.status, 200); accepted += r.response.accepted; }
      console.log(`# concurrent: 24 requests answered in ${Date.now() - t0} ms`);
    });
    await step('/metrics answers while the stage is busy', async () => {
      const m = await L.metrics(gw.metricsAddress);
      assert.ok(m.get('stackrelay_gateway_samples_held', { component: 'test_slow' }) > 0, 'nothing held by the slow stage?');
    });
    session.close();
    await step('graceful shutdown waits for the stage and exports everything accepted', async () => {
      const code = await L.stopGateway(gw, 60000);
      assert.equal(code, 0);
      const log = gw.log();
      assert.match(log, /shutdown complete/);
      assert.match(log, /accounting ok/);
      const m = new RegExp(`accounting component=test_count received=(\\d+) .*exported=(\\d+)`).exec(log);
      assert.ok(m, log);
      assert.equal(Number(m[2]), accepted);
    });
    gw = null;

    gw = await L.startGateway(config('20s', '1s'), dir, [], harness);
    await step('a stage slower than shutdown_timeout does not hold the exit', async () => {
      const s = await L.connect(`http://${gw.agentAddress}`);
      const r = await L.push(s, req(), { timeoutMs: 1000 });
      assert.equal(r.status, 200);
      s.close();
      const t0 = Date.now();
      const code = await L.stopGateway(gw, 10000);
      assert.equal(code, 0);
      assert.ok(Date.now() - t0 < 10000);
      assert.match(gw.log(), /shutdown timed out/);
      assert.match(gw.log(), /accounting component=test_slow received=8 accepted=0 refused=0 dropped=0 exported=0 held=8/);
    });
    gw = null;
  } catch (e) {
    failed++;
    console.log(`not ok - setup: ${e.stack || e}`);
  } finally {
    if (gw) await L.stopGateway(gw).catch(() => {});
  }
  if (failed && gw) console.log(gw.log());
  process.exit(failed ? 1 : 0);
})();
