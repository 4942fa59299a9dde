#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// The real stackrelay-gateway's `agent` receiver behind a memory_limiter that
// is always over its limit (limit_mib: 1): a request that comes while the
// pipeline refuses is answered 429 with retry_after_ms, its samples are
// accounted as refused (received = refused), and nothing of it is kept: its
// stack and executable definitions are not interned, since refusing is
// meant to relieve memory (docs/gateway.md, "Memory limit"). A malformed one
// is still answered 400 naming the field and byte.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const L = require('./gw-lib.js');

(async () => {
  let gw, sink, session, failed = 0;
  try {
    const dir = L.tmpdir('gw-memlim');
    let world = L.makeWorld(8);
    const instance = crypto.randomBytes(16);
    sink = await L.startSink();
    gw = await L.startGateway(L.agentGatewayYaml(sink.url, '', {
      memory_limiter: '{check_interval: 100ms, limit_mib: 1, spike_limit_mib: 0}',
    }), dir);
    session = await L.connect(`http://${gw.agentAddress}`);
    let seq = 0;
    const request = () => ({
      instanceId: instance, sequence: ++seq, stacks: world.stacks, executables: world.exes,
      samples: world.stacks.map((s, i) => ({
        stackId: s.id, pid: 1000, tid: 2000 + i, threadName: 'worker', processName: 'app',
        executablePath: '/usr/bin/app', count: 3, start: 1700000000000000000n, end: 1700000001000000000n,
      })),
    });
    // The limiter's first check may come after the first request: wait for a refusal.
    const r = await L.waitFor(async () => {
      const x = await L.push(session, request());
      return x.status === 429 ? x : null;
    }, 10000, 'a 429 from the memory-limited gateway');
    const checks = [];
    checks.push(['a request while the pipeline refuses: 429 with retry_after_ms', () => {
      assert.ok(r.response.retryAfterMs >= 1000, JSON.stringify(r.response));
    }]);
    // Once it refuses from the start, new definitions are not kept (a request admitted before the first
    // check interned its own: compare before and after).
    const before = await L.metrics(gw.metricsAddress);
    world = L.makeWorld(8, { salt: 'refused' });
    for (let i = 0; i < 2; i++) assert.equal((await L.push(session, request())).status, 429);
    const m = await L.metrics(gw.metricsAddress);
    checks.push(['its samples are refused and accounted (received = accepted + refused)', () => {
      const refused = m.get('stackrelay_gateway_samples_refused_total', { component: 'agent' });
      assert.ok(refused >= 3 * 3 * world.stacks.length, `refused ${refused}`);
      assert.equal(m.get('stackrelay_gateway_samples_received_total', { component: 'agent' }),
        m.get('stackrelay_gateway_samples_accepted_total', { component: 'agent' }) + refused);
    }]);
    checks.push(['nothing of a refused request is kept: no stack interned', () => {
      assert.equal(m.get('stackrelay_gateway_store_entries', { store: 'stacks' }),
        before.get('stackrelay_gateway_store_entries', { store: 'stacks' }));
    }]);
    // A malformed request is told what is wrong and where, as when admitted: field 5 (samples) holding a key of 0.
    const bad = Buffer.concat([L.encodePushRequest(request()), Buffer.from([5 << 3 | 2, 1, 0])]);
    const b = await L.post(session, bad);
    checks.push(['a malformed request while the pipeline refuses: 400 naming the field and byte', () => {
      assert.equal(b.status, 400);
      assert.match(L.decodePushResponse(b.body).error || '', /invalid PushRequest: Sample: bad field key \(at byte \d+\)/,
        b.body.toString());
    }]);
    failed += L.runChecks(checks);
    session.close();
    const code = await L.stopGateway(gw);
    if (code !== 0) {
      failed++;
      console.log(`not ok - gateway exit status ${code}`);
    }
  } catch (e) {
    failed++;
    console.log(`not ok - ${e.stack || e}`);
    if (gw) await L.stopGateway(gw).catch(() => {});
  } finally {
    if (sink) sink.srv.close();
  }
  if (failed && gw) console.log(gw.log().split('\n').slice(-40).join('\n'));
  process.exit(failed ? 1 : 0);
})();
