#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// The agent receiver over TLS with client certificates (mTLS) and a bearer
// token: certificates come from the openssl CLI in a temp dir; Node's http2
// is the client. The right certificate and token are served; a certificate
// from another CA, no certificate, no h2 ALPN, or a wrong/missing token are
// refused (handshake failure or 401), and the gateway keeps serving.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const tls = require('node:tls');
const crypto = require('node:crypto');
const L = require('./gw-lib.js');

(async () => {
  const dir = L.tmpdir('gw-tls');
  const certs = L.makeCerts(dir);
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, 's3cret-token\n');
  const sink = await L.startSink();
  let gw, failed = 0;
  const world = L.makeWorld(4);
  const instance = crypto.randomBytes(16);
  let seq = 0;
  const req = () => ({
    instanceId: instance, sequence: ++seq, stacks: world.stacks, executables: world.exes,
    samples: world.stacks.map((s, i) => ({ stackId: s.id, pid: 10, tid: 10 + i, count: 2, processName: 'p' })),
  });
  const good = { ca: fs.readFileSync(certs.caFile), cert: fs.readFileSync(certs.clientCert), key: fs.readFileSync(certs.clientKey) };
  const auth = { authorization: 'Bearer s3cret-token' };

  const check = async (name, fn) => {
    try {
      await fn();
      console.log(`ok - ${name}`);
    } catch (e) {
      failed++;
      console.log(`not ok - ${name}\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
    }
  };
  // Resolves to an Error when the TLS connection or the request fails.
  const attempt = async (opts, headers) => {
    let s;
    try {
      s = await L.connect(`https://${gw.agentAddress}`, { ...opts, servername: 'localhost' });
      const r = await L.push(s, req(), { headers, timeoutMs: 5000 });
      return r;
    } catch (e) {
      return e instanceof Error ? e : new Error(String(e));
    } finally {
      if (s) s.destroy();
    }
  };

  try {
    gw = await L.startGateway(`
receivers:
  agent:
    endpoint: 127.0.0.1:0
    tls: {cert_file: ${certs.serverCert}, key_file: ${certs.serverKey}, client_ca_file: ${certs.caFile}}
    auth: {bearer_token_file: ${tokenFile}}
exporters:
  otlp_http: {endpoint: ${sink.url}, compression: none}
service:
  pipelines:
    profiles: {receivers: [agent], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
`, dir);
    assert.match(gw.log(), /tls=yes mtls=yes auth=bearer/);

    await check('mTLS with the right client certificate and token is served', async () => {
      const r = await attempt(good, auth);
      assert.ok(!(r instanceof Error), String(r));
      assert.equal(r.status, 200);
      assert.equal(r.response.accepted, 8);
    });
    await check('a wrong bearer token gets 401', async () => {
      const r = await attempt(good, { authorization: 'Bearer nope' });
      assert.equal(r.status, 401);
      assert.match(r.response.error, /bearer token/);
    });
    await check('a missing bearer token gets 401', async () => {
      const r = await attempt(good, {});
      assert.equal(r.status, 401);
    });
    await check('a client certificate from another CA is refused in the handshake', async () => {
      const r = await attempt({ ca: good.ca, cert: fs.readFileSync(certs.rogueCert), key: fs.readFileSync(certs.rogueKey) }, auth);
      assert.ok(r instanceof Error, `expected a TLS failure, got status ${r.status}`);
    });
    await check('no client certificate is refused in the handshake', async () => {
      const r = await attempt({ ca: good.ca }, auth);
      assert.ok(r instanceof Error, `expected a TLS failure, got status ${r.status}`);
    });
    await check('a client without h2 in ALPN is refused', async () => {
      const [host, port] = L.splitAddress(gw.agentAddress);
      const err = await new Promise((resolve) => {
        const s = tls.connect({ host, port, servername: 'localhost', ...good, ALPNProtocols: ['http/1.1'] });
        s.on('secureConnect', () => { s.destroy(); resolve(null); });
        s.on('error', (e) => resolve(e));
      });
      assert.ok(err, 'the handshake succeeded without h2');
    });
    await check('a plain-text (h2c) client is refused', async () => {
      const r = await (async () => {
        let s;
        try {
          s = await L.connect(`http://${gw.agentAddress}`);
          return await L.push(s, req(), { headers: auth, timeoutMs: 5000 });
        } catch (e) {
          return e;
        } finally {
          if (s) s.destroy();
        }
      })();
      // Either the client sees an error or the connection ends without any response.
      assert.ok(r instanceof Error || r.status === 0, `expected a failure, got status ${r.status}`);
    });
    await check('the token file is re-read when it changes', async () => {
      fs.writeFileSync(tokenFile, 'rotated-token\n');
      // The receiver re-checks the file at most every 10 s.
      await L.waitFor(async () => {
        const r = await attempt(good, { authorization: 'Bearer rotated-token' });
        return !(r instanceof Error) && r.status === 200;
      }, 15000, 'the rotated token to be accepted');
      const old = await attempt(good, auth);
      assert.equal(old.status, 401);
    });
    await check('failures are counted in /metrics and the gateway still serves', async () => {
      const m = await L.metrics(gw.metricsAddress);
      assert.ok(m.get('stackrelay_gateway_agent_tls_handshake_failures_total') >= 3, m.text);
      assert.ok(m.get('stackrelay_gateway_agent_auth_failures_total') >= 3);
      assert.ok(m.get('stackrelay_gateway_agent_requests_total', { status: '401' }) >= 3);
      // Every answered request is timed: the histogram counts as many as the status counter.
      assert.equal(m.get('stackrelay_gateway_agent_request_duration_seconds_count'),
        m.get('stackrelay_gateway_agent_requests_total'), m.text);
      assert.equal(m.get('stackrelay_gateway_agent_request_duration_seconds_bucket', { le: '+Inf' }),
        m.get('stackrelay_gateway_agent_request_duration_seconds_count'));
      const r = await attempt(good, { authorization: 'Bearer rotated-token' });
      assert.equal(r.status, 200);
    });
    const code = await L.stopGateway(gw);
    if (code !== 0) { failed++; console.log(`not ok - exit status ${code}`); }
  } catch (e) {
    failed++;
    console.log(`not ok - setup: ${e.stack || e}`);
    if (gw) await L.stopGateway(gw).catch(() => {});
  } finally {
    sink.srv.close();
  }
  if (failed && gw) console.log(gw.log().split('\n').slice(-30).join('\n'));
  process.exit(failed ? 1 : 0);
})();
