#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// What an open agent connection costs the gateway in resident memory
// (bench/README.md, "Connection memory"): N HTTP/2 connections opened to
// the agent receiver, over h2c and over TLS, each then sending small
// requests (two, or --requests: an agent sends one every few seconds, so
// what a session keeps of its closed streams shows only after dozens);
// the gateway's RSS with them open, and per connection over its RSS before. "Churned" first opens and closes N connections that each sent
// a 30 KB body, as a replica's heap is after hours of traffic: freed blocks
// leave touched pages that the next connections' buffers land on, so there
// the RSS with the connections open is the figure (the RSS before them holds
// what the churn left). With --reference BIN,
// another gateway binary (a build of an earlier commit) runs the same
// steps beside it, alternating, and the ratios compare the two.
//
// Usage: conn-memory.js --build DIR [--reference GATEWAY] [--connections N] [--rounds R] [--requests Q]
'use strict';
const fs = require('fs');
const path = require('path');
const L = require('../../tests/integration/gw-lib.js');

function parseArgs(argv) {
  const o = { build: null, reference: null, connections: 2000, rounds: 2, requests: 2 };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i], v = argv[i + 1];
    if (a === '--help' || a === '-h') {
      console.log('usage: conn-memory.js --build DIR [--reference GATEWAY] [--connections N] [--rounds R] [--requests Q]\n' +
        '  --build DIR        the build directory whose gateway is measured\n' +
        '  --reference BIN    another stackrelay-gateway to measure beside it (ratios: build / reference)\n' +
        '  --connections N    connections held open at once (default 2000; the open-files limit must allow it)\n' +
        '  --rounds R         runs of each configuration, alternating (default 2)\n' +
        '  --requests Q       requests each connection sends, one after another (default 2)');
      process.exit(0);
    }
    // The options are o's keys; those with a number as default take numbers.
    const key = a.slice(2);
    if (!a.startsWith('--') || !Object.hasOwn(o, key) || v === undefined) {
      console.error(`conn-memory.js: unknown option or missing value: ${a} (see --help)`);
      process.exit(2);
    }
    o[key] = typeof o[key] === 'number' ? Number(v) : v;
    i++;
  }
  if (!o.build || !(o.connections > 0) || !(o.rounds > 0) || !(o.requests > 0)) {
    console.error('conn-memory.js: --build DIR is required; --connections, --rounds and --requests must be positive');
    process.exit(2);
  }
  return o;
}

const rssKib = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function openAll(url, n, tlsOpts) {
  const ss = [];
  for (let i = 0; i < n; i++) ss.push(await L.connect(url, tlsOpts));
  return ss;
}

// One gateway, one configuration: its RSS before and with the n connections open (KiB), and per connection
// (bytes) idle and after q requests on each.
async function measure(bin, tls, churned, n, q, certs, sinkUrl, dir) {
  const keys = `max_connections: ${n + 100}` +
    (tls ? `\n    tls: {cert_file: ${certs.serverCert}, key_file: ${certs.serverKey}}` : '');
  const g = await L.startGateway(L.agentGatewayYaml(sinkUrl, keys), dir, [], bin);
  const url = `${tls ? 'https' : 'http'}://${g.agentAddress}`;
  const tlsOpts = tls ? { ca: fs.readFileSync(certs.caFile), servername: 'localhost' } : {};
  const pid = g.proc.pid;
  try {
    if (churned) {
      const ds = await openAll(url, n, tlsOpts);
      await Promise.all(ds.map((s) => L.post(s, Buffer.alloc(30000, 7), {}, 60000).catch(() => 0)));
      for (const s of ds) s.destroy();
      await sleep(500);
    }
    const base = rssKib(pid);
    const ss = await openAll(url, n, tlsOpts);
    await sleep(500);
    const idle = rssKib(pid);
    const statuses = {};
    for (let round = 0; round < q; round++)
      await Promise.all(ss.map(async (s) => {
        const r = await L.post(s, Buffer.alloc(0), {}, 60000).catch(() => ({ status: 'error' }));
        statuses[r.status] = (statuses[r.status] || 0) + 1;
      }));
    await sleep(500);
    const used = rssKib(pid);
    for (const s of ss) s.destroy();
    if (statuses.error) throw new Error(`${statuses.error} requests failed`);
    return { base, open: used, idle: (idle - base) * 1024 / n, used: (used - base) * 1024 / n };
  } finally {
    await L.stopGateway(g);
  }
}

(async () => {
  const o = parseArgs(process.argv);
  const bins = { build: path.join(o.build, 'gateway/stackrelay-gateway') };
  if (o.reference) bins.reference = o.reference;
  for (const b of Object.values(bins))
    if (!fs.existsSync(b)) { console.error(`conn-memory.js: no gateway at ${b}`); process.exit(2); }
  const dir = L.tmpdir('conn-memory');
  const certs = L.makeCerts(dir);
  const sink = await L.startSink();
  const rows = [];
  for (const tls of [false, true])
    for (const churned of [false, true])
      for (let r = 0; r < o.rounds; r++)
        for (const [name, bin] of Object.entries(bins)) {
          const m = await measure(bin, tls, churned, o.connections, o.requests, certs, sink.url, dir);
          rows.push({ name, tls, churned, ...m });
          console.log(`${name.padEnd(9)} ${tls ? 'tls' : 'h2c'} ${churned ? 'churned' : 'fresh  '} ` +
            `RSS ${(m.base / 1024).toFixed(1)} MiB before, ${(m.open / 1024).toFixed(1)} MiB with ${o.connections} open; ` +
            `per connection: idle ${(m.idle / 1024).toFixed(1)} KiB, after ${o.requests} requests ${(m.used / 1024).toFixed(1)} KiB`);
        }
  if (o.reference) {
    console.log(`\nbuild / reference, RSS with ${o.connections} connections open after ${o.requests} requests each (mean of the rounds):`);
    for (const tls of [false, true])
      for (const churned of [false, true]) {
        const mean = (name) => {
          const xs = rows.filter((x) => x.name === name && x.tls === tls && x.churned === churned);
          return xs.reduce((a, x) => a + x.open, 0) / xs.length / 1024;
        };
        const b = mean('build'), ref = mean('reference');
        console.log(`  ${tls ? 'tls' : 'h2c'} ${churned ? 'churned' : 'fresh  '}: ${b.toFixed(1)} / ` +
          `${ref.toFixed(1)} MiB = ${(b / ref).toFixed(2)}`);
      }
  }
  sink.srv.close();
  process.exit(0);
})().catch((e) => { console.error(`conn-memory.js: ${e.stack || e}`); process.exit(1); });
