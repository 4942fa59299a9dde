#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// Large requests go to the agent receiver's decode thread (bodies over
// 256 KiB): a 20,000-sample request (also gzip) is accepted whole; a symbol
// table upload of several MiB is decoded while small requests from other
// agents keep being answered at once (each within 1 s); and a request whose
// stream the agent resets while it is being decoded is not counted, so its
// resend is counted exactly once. With a symbolize processor, uploads beyond
// its max_pending_uploads are answered 429 with retry_after_ms and all
// arrive when retried.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const zlib = require('node:zlib');
const L = require('./gw-lib.js');

(async () => {
  const dir = L.tmpdir('gw-large');
  let failed = 0, gw;
  const step = async (name, fn) => {
    try { await fn(); console.log(`ok - ${name}`); } catch (e) {
      failed++;
      console.log(`not ok - ${name}\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
    }
  };
  const sink = await L.startSink();
  const world = L.makeWorld(500, { nExes: 8 });
  const big = (instance, seq) => {
    const samples = [];
    let total = 0;
    for (let i = 0; i < 20000; i++) {
      const c = 1 + (i % 3);
      samples.push({ stackId: world.stacks[i % 500].id, pid: 1 + (i % 40), tid: i % 400, count: c,
        processName: `app${i % 40}`, threadName: `t${i % 16}`, executablePath: `/usr/bin/app${i % 40}` });
      total += c;
    }
    return { req: { instanceId: instance, sequence: seq, stacks: world.stacks, executables: world.exes, samples }, total };
  };
  try {
    gw = await L.startGateway(`
receivers:
  agent: {endpoint: 127.0.0.1:0}
processors:
  # Nothing can name the world's executables but their agents: they are asked to upload (wanted_symbols).
  symbolize: {debug_dirs: [], debuginfod_urls: [], wait_for_symbols: 0s}
exporters:
  otlp_http: {endpoint: ${sink.url}, compression: none}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [symbolize], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
`, dir);
    // A request that uses executable e alone (to be asked for its table, a request must use it; a stack with
    // other executables too would have this instance asked for theirs, and no other instance for 30 s).
    const using = (e) => {
      const st = { id: L.id('only', e.id.toString('hex')), frames: [{ exe: e.id, address: 0x1000, kind: 1 }] };
      return { stacks: [st], executables: [e], samples: [{ stackId: st.id, count: 1 }] };
    };
    const session = await L.connect(`http://${gw.agentAddress}`);
    const received = async () => (await L.metrics(gw.metricsAddress))
      .get('stackrelay_gateway_samples_received_total', { component: 'agent' });

    await step('a 20,000-sample request (over 256 KiB) is accepted whole, plain and gzip', async () => {
      const a = big(crypto.randomBytes(16), 1);
      assert.ok(L.encodePushRequest(a.req).length > 256 * 1024);
      let r = await L.push(session, a.req, { timeoutMs: 20000 });
      assert.equal(r.status, 200);
      assert.equal(r.response.accepted, a.total);
      const b = big(crypto.randomBytes(16), 1);
      r = await L.push(session, b.req, { gzip: true, timeoutMs: 20000 });
      assert.equal(r.status, 200);
      assert.equal(r.response.accepted, b.total);
    });

    await step('a multi-MiB symbol upload does not hold up other agents', async () => {
      const symbols = [];
      for (let i = 0; i < 200000; i++)
        symbols.push({ address: 0x400000 + ((i * 7919) % 200000) * 16, size: 16, name: `_ZN9stackrelay4test${i}fnEv` });
      // An executable no earlier request used: the world's were listed to the first step's instances, whose
      // claims hold for 30 s (GW_AGENT_WANTED_ASK_NS), as long as waitAsked waits.
      const fresh = { id: L.id('exe-upload', 0, 20), idKind: 1, fileName: 'binup', path: '/usr/bin/binup', fileSize: 4242 };
      const inst = crypto.randomBytes(16);
      const seq = await L.waitAsked(session, inst, [fresh.id], using(fresh));
      const upload = { instanceId: inst, sequence: seq, executables: [fresh],
        symbolTables: [{ exe: fresh.id, symbols, sources: ['.symtab'] }] };
      const other = await L.connect(`http://${gw.agentAddress}`);
      const t0 = Date.now();
      const bigAnswer = L.push(session, upload, { timeoutMs: 30000 }).then((r) => ({ r, ms: Date.now() - t0 }));
      let worst = 0;
      for (let i = 0; i < 20; i++) {
        const t = Date.now();
        const r = await L.push(other, { instanceId: crypto.randomBytes(16), sequence: 1, stacks: world.stacks.slice(0, 2),
          executables: world.exes, samples: [{ stackId: world.stacks[0].id, count: 1 }] }, { timeoutMs: 1000 });
        assert.equal(r.status, 200);
        worst = Math.max(worst, Date.now() - t);
      }
      const { r, ms } = await bigAnswer;
      assert.equal(r.status, 200, JSON.stringify(r.response));
      other.close();
      const m = await L.metrics(gw.metricsAddress);
      assert.equal(m.get('stackrelay_gateway_agent_symbol_tables_total'), 1);
      console.log(`# ${L.encodePushRequest(upload).length} byte upload answered after ${ms} ms; ` +
        `slowest of 20 small requests meanwhile: ${worst} ms`);
    });

    await step('a request reset while decoding is not counted; its resend counts once', async () => {
      const inst = crypto.randomBytes(16);
      const a = big(inst, 7);
      const body = L.encodePushRequest(a.req);
      const before = await received();
      await new Promise((resolve) => {
        const req = session.request({ ':method': 'POST', ':path': '/stackrelay.v1.Ingest/Push',
          'content-type': 'application/x-protobuf' });
        req.on('error', () => {});
        req.on('close', resolve);
        req.end(body, () => setImmediate(() => req.close(0x8))); // RST_STREAM CANCEL right after the body
      });
      const r = await L.push(session, a.req, { timeoutMs: 20000 });
      assert.equal(r.status, 200);
      assert.equal(r.response.accepted, a.total);
      // Whichever came first (the reset or the end of decoding), the samples count once.
      assert.equal(await received() - before, a.total);
    });

    await step('uploads beyond max_pending_uploads wait at the agent (429, retry_after_ms) and all arrive', async () => {
      // Mangled names: demangling makes adding a table slower than decoding the next upload.
      const table = (k) => {
        const symbols = [];
        for (let i = 0; i < 150000; i++)
          symbols.push({ address: 0x400000 + i * 16, size: 16, name: `_ZN9stackrelay4test${k}fn${i}Ev` });
        return symbols;
      };
      const g2 = await L.startGateway(`
receivers:
  agent: {endpoint: 127.0.0.1:0}
processors:
  symbolize: {debug_dirs: [], debuginfod_urls: [], max_pending_uploads: 1MiB}
exporters:
  otlp_http: {endpoint: ${sink.url}, compression: none}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [symbolize], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
`, dir);
      try {
        // Encoded before connecting: building them blocks this process for seconds, long enough for the
        // gateway's keepalive or header timeout to close a connection that is open meanwhile.
        const insts = world.exes.slice(0, 6).map(() => crypto.randomBytes(16));
        const bodies = world.exes.slice(0, 6).map((e, k) => L.encodePushRequest({ instanceId: insts[k],
          sequence: 1, executables: [e], symbolTables: [{ exe: e.id, symbols: table(k), sources: ['.symtab'] }] }));
        const s2 = await L.connect(`http://${g2.agentAddress}`);
        // Each instance waits to be asked for its executable's table first, as agents do.
        for (let k = 0; k < 6; k++)
          await L.waitAsked(s2, insts[k], [world.exes[k].id], using(world.exes[k]));
        let deferred = 0;
        await Promise.all(bodies.map(async (body) => {
          for (let attempt = 0; ; attempt++) {
            const r = await L.post(s2, body, {}, 60000);
            const resp = L.decodePushResponse(r.body);
            if (r.status === 200) return;
            assert.equal(r.status, 429, JSON.stringify(resp));
            assert.ok(resp.retryAfterMs > 0 && /max_pending_uploads/.test(resp.error), JSON.stringify(resp));
            assert.ok(attempt < 120, 'an upload still deferred after 120 tries');
            deferred++;
            await new Promise((res) => setTimeout(res, resp.retryAfterMs));
          }
        }));
        s2.close();
        const m = await L.waitFor(async () => {
          const mm = await L.metrics(g2.metricsAddress);
          // Added (on a worker), then no longer pending (on the loop, just after): wait for both.
          return mm.get('stackrelay_gateway_symbolize_uploads_total') === 6 &&
            mm.get('stackrelay_gateway_symbolize_uploads_pending_bytes') === 0 ? mm : null;
        }, 60000, 'the 6 tables to be added and none pending');
        assert.ok(deferred >= 1, 'no upload was told to wait');
        assert.equal(m.get('stackrelay_gateway_agent_symbol_tables_total'), 6);
        assert.equal(m.get('stackrelay_gateway_agent_symbol_tables_deferred_total'), deferred);
        assert.equal(m.get('stackrelay_gateway_symbolize_uploads_pending_bytes'), 0);
        console.log(`# 6 uploads of 150,000 symbols with max_pending_uploads 1MiB: ${deferred} answers 429`);
      } finally {
        await L.stopGateway(g2).catch(() => {});
      }
    });

    await step('everything accepted is exported', async () => {
      await L.waitFor(async () => {
        const m = await L.metrics(gw.metricsAddress);
        return m.get('stackrelay_gateway_samples_exported_total', { component: 'otlp_http' }) ===
          m.get('stackrelay_gateway_samples_accepted_total', { component: 'agent' });
      }, 20000, 'the exporter to catch up');
    });
    session.close();
    assert.equal(await L.stopGateway(gw), 0);
    gw = null;
  } catch (e) {
    failed++;
    console.log(`not ok - setup: ${e.stack || e}`);
  } finally {
    if (gw) { console.log(gw.log()); await L.stopGateway(gw).catch(() => {}); }
    sink.srv.close();
  }
  process.exit(failed ? 1 : 0);
})();
