#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// The agent receiver's time limits and connection bounds, with short
// settings: a connection that sends nothing is closed after header_timeout;
// an idle connection gets GOAWAY after idle_timeout; a request whose body
// stalls gets 408 after request_timeout; a peer that stops answering PINGs
// is closed after keepalive.timeout (a raw HTTP/2 client written here that
// never acknowledges PING); past max_connections, the oldest connections
// without a request are closed to make room. Every case is counted in
// /metrics and the gateway keeps serving.
'use strict';

const assert = require('node:assert/strict');
const net = require('node:net');
const crypto = require('node:crypto');
const L = require('./gw-lib.js');

function frame(type, flags, stream, payload) {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}

// HPACK: indexed fields from the static table and literals with an indexed name (RFC 7541).
function hpackRequest(authority) {
  const lit = (idx, v) => Buffer.concat([Buffer.from([0x00 | idx]), Buffer.from([v.length]), Buffer.from(v)]);
  return Buffer.concat([
    Buffer.from([0x83, 0x86]), // :method POST, :scheme http
    lit(4, '/stackrelay.v1.Ingest/Push'), // :path (name index 4, literal without indexing)
    lit(1, authority), // :authority
    Buffer.from([0x0f, 0x10, 'application/x-protobuf'.length]), Buffer.from('application/x-protobuf'), // content-type (index 31)
  ]);
}

// Resolves with how long the server took to close the socket.
function rawConnection(port, host, send) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const s = net.connect(port, host, () => send(s));
    s.on('data', () => {}); // never acknowledge anything
    s.on('close', () => resolve(Date.now() - t0));
    s.on('error', () => {});
    setTimeout(() => { s.destroy(); reject(new Error('the gateway did not close the connection')); }, 10000);
  });
}

(async () => {
  const dir = L.tmpdir('gw-timeouts');
  let failed = 0, gw;
  const step = async (name, fn) => {
    try { await fn(); console.log(`ok - ${name}`); } catch (e) {
      failed++;
      console.log(`not ok - ${name}\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
    }
  };
  const sink = await L.startSink();
  try {
    gw = await L.startGateway(`
receivers:
  agent:
    endpoint: 127.0.0.1:0
    header_timeout: 400ms
    request_timeout: 600ms
    idle_timeout: 800ms
    keepalive: {interval: 300ms, timeout: 300ms}
    max_connections: 20
exporters:
  otlp_http: {endpoint: ${sink.url}, compression: none}
service:
  pipelines:
    profiles: {receivers: [agent], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
`, dir);
    const [host, port] = L.splitAddress(gw.agentAddress);

    await step('a connection that sends nothing is closed after header_timeout', async () => {
      const ms = await rawConnection(port, host, () => {});
      console.log(`# closed after ${ms} ms (header_timeout 400ms)`);
    });

    await step('an idle connection gets GOAWAY after idle_timeout', async () => {
      const s = await L.connect(`http://${gw.agentAddress}`);
      const r = await L.push(s, { instanceId: crypto.randomBytes(16), sequence: 1 });
      assert.equal(r.status, 200);
      await new Promise((resolve, reject) => {
        s.on('goaway', () => resolve());
        s.on('close', () => resolve());
        setTimeout(() => reject(new Error('no GOAWAY')), 10000);
      });
      s.destroy();
    });

    await step('a request whose body stalls gets 408 after request_timeout', async () => {
      const s = await L.connect(`http://${gw.agentAddress}`);
      s.on('error', () => {});
      const status = await new Promise((resolve, reject) => {
        const req = s.request({ ':method': 'POST', ':path': '/stackrelay.v1.Ingest/Push', 'content-type': 'application/x-protobuf' });
        req.write(Buffer.from([0x08])); // half a field, then nothing
        req.on('response', (h) => resolve(h[':status']));
        req.on('error', () => {});
        setTimeout(() => reject(new Error('no answer')), 10000);
      });
      assert.equal(status, 408);
      s.destroy();
    });

    await step('a peer that does not answer PING is closed after keepalive.timeout', async () => {
      const ms = await rawConnection(port, host, (s) => {
        s.write(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
        s.write(frame(4, 0, 0, Buffer.alloc(0))); // SETTINGS
        s.write(frame(1, 0x4, 1, hpackRequest(gw.agentAddress))); // HEADERS, END_HEADERS, body to follow (never)
      });
      console.log(`# closed after ${ms} ms (keepalive 300ms + 300ms)`);
    });

    await step('past max_connections, the oldest silent connections make room (or new ones are closed)', async () => {
      const socks = [];
      for (let i = 0; i < 25; i++) {
        socks.push(await new Promise((resolve) => {
          const s = net.connect(port, host, () => resolve(s));
          s.on('error', () => {});
        }));
      }
      await L.waitFor(async () => {
        const m = await L.metrics(gw.metricsAddress);
        return m.get('stackrelay_gateway_agent_connections_evicted_total') +
          m.get('stackrelay_gateway_agent_connections_refused_total') >= 5;
      }, 5000, 'evicted or refused connections to be counted');
      for (const s of socks) s.destroy();
    });

    await step('every case is counted and the gateway still serves', async () => {
      const m = await L.metrics(gw.metricsAddress);
      assert.ok(m.get('stackrelay_gateway_agent_header_timeouts_total') >= 1, m.text);
      assert.ok(m.get('stackrelay_gateway_agent_idle_closes_total') >= 1);
      assert.ok(m.get('stackrelay_gateway_agent_keepalive_timeouts_total') >= 1);
      assert.ok(m.get('stackrelay_gateway_agent_requests_total', { status: '408' }) >= 1);
      const s = await L.connect(`http://${gw.agentAddress}`);
      const r = await L.push(s, { instanceId: crypto.randomBytes(16), sequence: 2 });
      assert.equal(r.status, 200);
      s.destroy();
    });
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
