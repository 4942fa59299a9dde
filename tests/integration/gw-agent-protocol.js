#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// The real stackrelay-gateway, its `agent` receiver over h2c, driven by an
// independent client (Node's http2 + a protobuf encoder written from the
// .proto field numbers): definitions and missing-ID negotiation, resend
// de-duplication, version check, error statuses (400/404/405/413/415),
// gzip and gzip bombs, garbage on the socket, and the accounting rule
// (received = accepted + refused at the receiver; exported = accepted at the
// exporter) read from /metrics.
'use strict';

const assert = require('node:assert/strict');
const net = require('node:net');
const zlib = require('node:zlib');
const crypto = require('node:crypto');
const L = require('./gw-lib.js');

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

let gw, sink, session, world, dir;
const instance = crypto.randomBytes(16);
let seq = 0;

function samplesFor(stacks, count = 3, extra = {}) {
  return stacks.map((s, i) => ({
    stackId: s.id, pid: 1000 + (i % 7), tid: 2000 + i, threadName: `worker-${i % 3}`, processName: `app${i % 2}`,
    executablePath: `/usr/bin/app${i % 2}`, containerId: i % 2 ? 'a'.repeat(64) : '', count,
    start: 1700000000000000000n, end: 1700000001000000000n, ...extra,
  }));
}

async function m() { return L.metrics(gw.metricsAddress); }

test('stackrelay_build_info names the version, commit and protocols', async () => {
  const info = (await m()).text.split('\n').filter((l) => l.startsWith('stackrelay_build_info{'));
  assert.equal(info.length, 1, info.join('\n'));
  assert.match(info[0], /version="[0-9][^"]*",commit="[^"]+",agent_protocol="stackrelay\.v1",otlp_profiles="1\.9,1\.10"\} 1$/);
});

test('samples without definitions are refused and their IDs listed missing', async () => {
  const r = await L.push(session, { instanceId: instance, sequence: ++seq, samples: samplesFor(world.stacks.slice(0, 4)) });
  assert.equal(r.status, 200);
  assert.equal(r.response.accepted, 0);
  assert.deepEqual(r.response.missingStacks.sort(), world.stacks.slice(0, 4).map((s) => s.id.toString('hex')).sort());
});

test('a stack whose executables are unknown lists the executables missing too', async () => {
  const r = await L.push(session, {
    instanceId: instance, sequence: ++seq, stacks: world.stacks.slice(0, 1), samples: samplesFor(world.stacks.slice(0, 1)),
  });
  assert.equal(r.status, 200);
  assert.equal(r.response.accepted, 0);
  assert.ok(r.response.missingExecutables.length >= 1, JSON.stringify(r.response));
  assert.deepEqual(r.response.missingStacks, [world.stacks[0].id.toString('hex')]);
});

test('resend with definitions is accepted', async () => {
  const r = await L.push(session, {
    instanceId: instance, sequence: ++seq, stacks: world.stacks.slice(0, 4), executables: world.exes,
    samples: samplesFor(world.stacks.slice(0, 4)),
  });
  assert.equal(r.status, 200, JSON.stringify(r.response));
  assert.equal(r.response.accepted, 12);
  assert.deepEqual(r.response.missingStacks, []);
  assert.deepEqual(r.response.missingExecutables, []);
});

test('definitions stay known: samples alone are accepted later', async () => {
  const r = await L.push(session, { instanceId: instance, sequence: ++seq, samples: samplesFor(world.stacks.slice(0, 4), 5) },
    { gzip: true });
  assert.equal(r.status, 200);
  assert.equal(r.response.accepted, 20);
});

test('a resend with the same (instance_id, sequence) gets the same answer and is not counted twice', async () => {
  const before = await m();
  const req = { instanceId: instance, sequence: ++seq, samples: samplesFor(world.stacks.slice(0, 2), 7) };
  const a = await L.push(session, req);
  const b = await L.push(session, req);
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  assert.deepEqual(a.body, b.body);
  assert.equal(a.response.accepted, 14);
  const after = await m();
  const d = (n, l) => after.get(n, l) - before.get(n, l);
  assert.equal(d('stackrelay_gateway_samples_received_total', { component: 'agent' }), 14);
  assert.equal(d('stackrelay_gateway_agent_duplicate_requests_total', { component: 'agent' }), 1);
  assert.equal(d('stackrelay_gateway_agent_duplicate_samples_total', { component: 'agent' }), 14);
});

test('kernel frames need the kernel definition', async () => {
  const kw = L.makeWorld(2, { kernel: true, salt: 'k' });
  const r1 = await L.push(session, {
    instanceId: instance, sequence: ++seq, stacks: kw.stacks, executables: kw.exes,
    samples: samplesFor(kw.stacks, 1, { kernelId: kw.kernel.id }),
  });
  assert.equal(r1.response.accepted, 0);
  assert.deepEqual(r1.response.missingKernels, [kw.kernel.id.toString('hex')]);
  const r2 = await L.push(session, {
    instanceId: instance, sequence: ++seq, stacks: kw.stacks, executables: kw.exes, kernels: [kw.kernel],
    samples: samplesFor(kw.stacks, 1, { kernelId: kw.kernel.id }),
  });
  assert.equal(r2.response.accepted, 2, JSON.stringify(r2.response));
});

test('an unsupported protocol version gets 400 naming the supported one', async () => {
  const r = await L.push(session, { version: 7, instanceId: instance, sequence: ++seq, samples: samplesFor(world.stacks.slice(0, 1)) });
  assert.equal(r.status, 400);
  assert.match(r.response.error, /protocol_version 7 is not supported; this gateway speaks version 1/);
});

test('garbage body gets 400 with a decoding error', async () => {
  const r = await L.post(session, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3]));
  assert.equal(r.status, 400);
  assert.match(L.decodePushResponse(r.body).error, /PushRequest/);
});

test('wrong content-type gets 415, wrong path 404, wrong method 405', async () => {
  const body = L.encodePushRequest({ instanceId: instance, sequence: ++seq });
  let r = await L.post(session, body, { 'content-type': 'application/json' });
  assert.equal(r.status, 415);
  r = await L.post(session, body, { ':path': '/nope' });
  assert.equal(r.status, 404);
  r = await L.post(session, body, { ':method': 'PUT' });
  assert.equal(r.status, 405);
  r = await L.post(session, body, { 'content-encoding': 'br' });
  assert.equal(r.status, 415);
});

test('bodies over max_request_bytes get 413, also when gzip inflates past it (gzip bomb)', async () => {
  const big = Buffer.alloc(300 * 1024, 0x41);
  let r = await L.post(session, big);
  assert.equal(r.status, 413);
  const bomb = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024, 0)); // 64 MiB of zeros in ~64 KiB
  r = await L.post(session, bomb, { 'content-encoding': 'gzip' });
  assert.equal(r.status, 413);
  assert.match(L.decodePushResponse(r.body).error, /decompresses to more than max_request_bytes/);
  r = await L.post(session, Buffer.from('not gzip at all'), { 'content-encoding': 'gzip' });
  assert.equal(r.status, 400);
});

test('garbage on a raw connection closes that connection only', async () => {
  const [host, port] = L.splitAddress(gw.agentAddress);
  await new Promise((resolve, reject) => {
    const s = net.connect(port, host, () => s.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n' + 'x'.repeat(1000)));
    s.on('data', () => {});
    s.on('close', resolve);
    s.on('error', () => resolve());
    setTimeout(() => reject(new Error('garbage connection was not closed')), 5000);
  });
  const r = await L.push(session, { instanceId: instance, sequence: ++seq, samples: samplesFor(world.stacks.slice(0, 1), 1) });
  assert.equal(r.status, 200);
  assert.equal(r.response.accepted, 1);
});

test('many concurrent streams on one connection all complete', async () => {
  const rs = await Promise.all(Array.from({ length: 64 }, () =>
    L.push(session, { instanceId: instance, sequence: ++seq, samples: samplesFor(world.stacks.slice(0, 4), 1) })));
  for (const r of rs) {
    assert.equal(r.status, 200);
    assert.equal(r.response.accepted, 4);
  }
});

test('agent drop counters are exposed', async () => {
  await L.push(session, { instanceId: instance, sequence: ++seq, drops: { ringBufferFull: 5, stackErrors: 2 } });
  const mm = await m();
  assert.equal(mm.get('stackrelay_gateway_agent_reported_drops_total', { reason: 'ring_buffer_full' }), 5);
  assert.equal(mm.get('stackrelay_gateway_agent_reported_drops_total', { reason: 'stack_errors' }), 2);
});

test('store gauges: the stacks store bytes include the locations and shared lines it holds', async () => {
  const mm = await m();
  const stacks = { store: 'stacks' };
  assert.ok(mm.get('stackrelay_gateway_store_entries', stacks) > 0, mm.text);
  const held = mm.get('stackrelay_gateway_store_held_bytes', { store: 'locations' });
  const lines = mm.get('stackrelay_gateway_shared_lines_charged_bytes');
  assert.ok(held > 0, mm.text);
  assert.ok(lines >= 0, mm.text);
  assert.ok(mm.get('stackrelay_gateway_store_bytes', stacks) >= held + lines, mm.text);
});

test('accounting: receiver received = accepted + refused; exporter exports everything accepted', async () => {
  const mm = await L.waitFor(async () => {
    const x = await m();
    const acc = x.get('stackrelay_gateway_samples_accepted_total', { component: 'agent' });
    return x.get('stackrelay_gateway_samples_exported_total', { component: 'otlp_http' }) === acc ? x : null;
  }, 15000, 'the exporter to export everything');
  const rec = mm.get('stackrelay_gateway_samples_received_total', { component: 'agent' });
  const acc = mm.get('stackrelay_gateway_samples_accepted_total', { component: 'agent' });
  const ref = mm.get('stackrelay_gateway_samples_refused_total', { component: 'agent' });
  assert.ok(acc > 0);
  assert.equal(rec, acc + ref, mm.text);
  assert.equal(mm.get('stackrelay_gateway_samples_held', { component: 'agent' }), 0);
  assert.equal(mm.get('stackrelay_gateway_samples_held', { component: 'otlp_http' }), 0);
  assert.ok(sink.st.requests > 0);
});

test('/healthz and /readyz answer 200, unknown paths 404', async () => {
  assert.equal((await L.httpGet(gw.metricsAddress, '/healthz')).status, 200);
  assert.equal((await L.httpGet(gw.metricsAddress, '/readyz')).status, 200);
  assert.equal((await L.httpGet(gw.metricsAddress, '/nope')).status, 404);
});

// Sends raw bytes to the telemetry server; resolves with the status line.
function rawHttp(address, bytes) {
  const [host, port] = L.splitAddress(address);
  return new Promise((resolve, reject) => {
    let got = '';
    const s = net.connect(port, host, () => s.write(bytes));
    s.on('data', (d) => { got += d; });
    s.on('close', () => resolve(got));
    s.on('error', reject);
    setTimeout(() => { s.destroy(); reject(new Error('telemetry server did not answer')); }, 5000);
  });
}

test('the telemetry server refuses bad requests with the right status', async () => {
  assert.match(await rawHttp(gw.metricsAddress, 'POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n'), /^HTTP\/1.1 405 /);
  assert.match(await rawHttp(gw.metricsAddress, 'garbage\r\n\r\n'), /^HTTP\/1.1 400 /);
  assert.match(await rawHttp(gw.metricsAddress, 'GET /metrics HTTP/1.1\r\nX: ' + 'a'.repeat(9000) + '\r\n\r\n'),
    /^HTTP\/1.1 431 /);
  const head = await rawHttp(gw.metricsAddress, 'HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.match(head, /^HTTP\/1.1 200 /);
  assert.match(head, /\r\n\r\n$/); // no body
  assert.match(await rawHttp(gw.metricsAddress, 'GET /metrics?x=1 HTTP/1.0\r\n\r\n'), /^HTTP\/1.1 200 [^]*stackrelay_gateway_ready 1/);
});

// The telemetry server sits on the connection layer: HTTP/2 with prior knowledge (h2c) is served too.
test('the telemetry server answers over h2c, HEAD without a body', async () => {
  const http2 = require('node:http2');
  const h2 = http2.connect(`http://${gw.metricsAddress}`);
  const get = (method, p) => new Promise((resolve, reject) => {
    const req = h2.request({ ':method': method, ':path': p });
    let body = '';
    let head;
    req.on('response', (h) => { head = h; });
    req.on('data', (d) => { body += d; });
    req.on('end', () => resolve({ status: head[':status'], length: head['content-length'], body }));
    req.on('error', reject);
    req.end();
  });
  try {
    const r = await get('GET', '/metrics?x=1');
    assert.equal(r.status, 200);
    assert.match(r.body, /stackrelay_gateway_ready 1/);
    const h = await get('HEAD', '/healthz');
    assert.equal(h.status, 200);
    assert.equal(h.length, '3');
    assert.equal(h.body, '');
    assert.equal((await get('DELETE', '/metrics')).status, 405);
  } finally {
    h2.close();
  }
});

(async () => {
  let failed = 0;
  dir = L.tmpdir('gw-proto');
  world = L.makeWorld(16);
  try {
    sink = await L.startSink();
    gw = await L.startGateway(L.agentGatewayYaml(sink.url, 'max_request_bytes: 256KiB'), dir);
    session = await L.connect(`http://${gw.agentAddress}`);
    for (const t of tests) {
      try {
        await t.fn();
        console.log(`ok - ${t.name}`);
      } catch (e) {
        failed++;
        console.log(`not ok - ${t.name}\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
      }
    }
    // Graceful shutdown: a request already started when SIGTERM arrives is completed
    // (GOAWAY names it), and the gateway then exits 0.
    try {
      const body = L.encodePushRequest({ instanceId: instance, sequence: ++seq, samples: samplesFor(world.stacks.slice(0, 2), 2) });
      const answer = new Promise((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': '/stackrelay.v1.Ingest/Push',
          'content-type': 'application/x-protobuf' });
        const chunks = [];
        let status = 0;
        req.on('response', (h) => { status = h[':status']; });
        req.on('data', (d) => chunks.push(d));
        req.on('end', () => resolve({ status, body: Buffer.concat(chunks) }));
        req.on('error', reject);
        req.write(body.subarray(0, 5));
        setTimeout(() => {
          gw.proc.kill('SIGTERM');
          setTimeout(() => req.end(body.subarray(5)), 300);
        }, 200);
      });
      const goaway = new Promise((resolve) => session.once('goaway', resolve));
      const exit = new Promise((resolve) => gw.proc.once('exit', (code) => resolve(code)));
      const r = await answer;
      assert.equal(r.status, 200);
      assert.equal(L.decodePushResponse(r.body).accepted, 4);
      await goaway;
      assert.equal(await exit, 0);
      assert.match(gw.log(), /shutdown complete/);
      console.log('ok - a request in progress at SIGTERM completes (GOAWAY), then the gateway exits 0');
    } catch (e) {
      failed++;
      console.log(`not ok - graceful shutdown: ${e.stack || e}`);
    }
    session.close();
    const code = await L.stopGateway(gw);
    if (code !== 0) {
      failed++;
      console.log(`not ok - gateway exit status ${code}\n${gw.log()}`);
    }
  } catch (e) {
    failed++;
    console.log(`not ok - setup: ${e.stack || e}`);
    if (gw) await L.stopGateway(gw).catch(() => {});
  } finally {
    if (sink) sink.srv.close();
  }
  if (failed && gw) console.log(gw.log().split('\n').slice(-40).join('\n'));
  process.exit(failed ? 1 : 0);
})();
