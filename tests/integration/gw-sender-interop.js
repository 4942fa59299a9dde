#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// The real agent sender (sender-driver: agent/sender*.c over libcurl) against
// the real gateway runtime and agent receiver (gw-harness):
//  - two replicas behind a round-robin TCP proxy (libcurl opens a connection
//    per h2c request, so requests alternate, each with the definitions it
//    needs): the replicas together export exactly what the sender submitted,
//    which equals what the sender counts as accepted;
//  - mTLS with a bearer token: everything submitted is accepted and exported.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { execFile } = require('node:child_process');
const L = require('./gw-lib.js');

const harness = process.env.SR_GW_HARNESS, driver = process.env.SR_SENDER_DRIVER;
if (!harness || !driver) { console.log('SKIP: SR_GW_HARNESS or SR_SENDER_DRIVER not set'); process.exit(77); }

function runDriver(args) {
  return new Promise((resolve, reject) => {
    execFile(driver, args, { timeout: 60000 }, (err, stdout, stderr) => {
      if (err && err.code !== 0) return reject(new Error(`sender-driver failed (${err.code}): ${stderr}`));
      try { resolve(JSON.parse(stdout.trim().split('\n').pop())); } catch (e) { reject(new Error(`bad output: ${stdout}\n${stderr}`)); }
    });
  });
}

function proxy(upstreams) {
  let next = 0;
  const srv = net.createServer((c) => {
    const [host, port] = L.splitAddress(upstreams[next++ % upstreams.length]);
    const u = net.connect(port, host);
    c.pipe(u);
    u.pipe(c);
    const end = () => { c.destroy(); u.destroy(); };
    c.on('error', end);
    u.on('error', end);
  });
  return new Promise((r) => srv.listen(0, '127.0.0.1', () => r({ srv, address: `127.0.0.1:${srv.address().port}` })));
}

function exported(log) {
  const m = /accounting component=test_count received=\d+ accepted=\d+ refused=\d+ dropped=(\d+) exported=(\d+)/.exec(log);
  assert.ok(m, log);
  assert.equal(Number(m[1]), 0);
  assert.match(log, /accounting ok/);
  return Number(m[2]);
}

const yaml = (extra = '') => `
receivers:
  agent:
    endpoint: 127.0.0.1:0
${extra}
exporters:
  test_count: {}
service:
  pipelines:
    profiles: {receivers: [agent], exporters: [test_count]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
`;

(async () => {
  const dir = L.tmpdir('gw-interop');
  let failed = 0;
  const step = async (name, fn) => {
    try { await fn(); console.log(`ok - ${name}`); } catch (e) {
      failed++;
      console.log(`not ok - ${name}\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
    }
  };

  await step('the agent sender through a round-robin proxy to two gateways: exactly what was submitted', async () => {
    const a = await L.startGateway(yaml(), dir, [], harness), b = await L.startGateway(yaml(), dir, [], harness);
    const p = await proxy([a.agentAddress, b.agentAddress]);
    try {
      // Windows 30 ms apart, so they travel in many requests.
      const r = await runDriver(['--endpoint', `http://${p.address}`, '--windows', '30', '--samples', '200',
        '--interval-ms', '30', '--max-connection-age-ms', '1', '--backoff-ms', '20,200']);
      assert.equal(r.dropped, 0, JSON.stringify(r));
      assert.equal(r.accepted, r.samples_submitted);
      // (Definitions go with the first use on each connection, so a replica rarely has to ask.)
      p.srv.close();
      assert.equal(await L.stopGateway(a), 0);
      assert.equal(await L.stopGateway(b), 0);
      const ea = exported(a.log()), eb = exported(b.log());
      assert.ok(ea > 0 && eb > 0, `one replica exported nothing (${ea}, ${eb})`);
      assert.equal(ea + eb, r.samples_submitted);
      console.log(`# ${r.samples_submitted} samples, ${r.requests_ok} requests, ${r.resent_missing} resent for missing ` +
        `definitions, exported ${ea} + ${eb}`);
    } finally {
      p.srv.close();
      await L.stopGateway(a).catch(() => {});
      await L.stopGateway(b).catch(() => {});
    }
  });

  await step('the agent sender over mTLS with a bearer token', async () => {
    const certs = L.makeCerts(dir);
    const token = path.join(dir, 'token');
    fs.writeFileSync(token, 'interop-token\n');
    const g = await L.startGateway(yaml(`    tls: {cert_file: ${certs.serverCert}, key_file: ${certs.serverKey}, client_ca_file: ${certs.caFile}}
    auth: {bearer_token_file: ${token}}`), dir, [], harness);
    try {
      const [, port] = L.splitAddress(g.agentAddress);
      const r = await runDriver(['--endpoint', `https://localhost:${port}`, '--windows', '10', '--samples', '100',
        '--ca', certs.caFile, '--cert', certs.clientCert, '--key', certs.clientKey, '--token-file', token]);
      assert.equal(r.dropped, 0, JSON.stringify(r));
      assert.equal(r.accepted, r.samples_submitted);
      assert.equal(await L.stopGateway(g), 0);
      assert.equal(exported(g.log()), r.samples_submitted);
    } finally {
      await L.stopGateway(g).catch(() => {});
    }
  });
  process.exit(failed ? 1 : 0);
})();
