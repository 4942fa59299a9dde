#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// A fast OTLP/HTTP profiles sink for the fleet soak: it reads every POST body
// (gzip or not), walks ExportProfilesServiceRequest → ResourceProfiles →
// ScopeProfiles → Profile → Sample and sums the samples' values (field 4 of
// Sample in OTLP v1.10: the CPU sample counts the gateway exports), and
// answers 200 with an empty ExportProfilesServiceResponse. Faster than
// tests/fakes/fake_pyroscope.py (which decodes and validates everything,
// and answers scripted per request, not per time window).
//
// Fault windows: POST /fault?status=503&retry_after=5&seconds=120 answers every
// export with that status (and Retry-After seconds when given) for that long;
// POST /fault?status=200 ends a window. The requests answered with an error
// are counted, their samples not. GET /stats returns JSON
// {requests, statuses, samples, bytes, fault, redelivered, redeliveredSamples}.
//
// Usage: sink.js [--port 0] [--port-file FILE]; prints "ready PORT".
'use strict';

const http = require('node:http');
const zlib = require('node:zlib');
const fs = require('node:fs');
const crypto = require('node:crypto');
const { varint } = require('../gateway-throughput/wire.js');

function arg(name, def) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 ? process.argv[i + 1] : def;
}

const st = { requests: 0, statuses: {}, samples: 0, bytes: 0, decodeErrors: 0, fault: null, redelivered: 0,
  redeliveredSamples: 0 };
// Bodies already counted, by SHA-1 (the most recent 1M): an exporter that resends a request whose 200 it
// did not see (a timeout, a crash before the disk queue forgot it) delivers the same bytes again. Those
// are counted as redelivered, not as samples. Distinct requests never carry identical bodies: each
// batch has its own time range.
const seen = new Set();
const seenOrder = [];
let fault = null; // {status, retryAfter, until}

// Sums the values of every Sample: fields by level (1 resource_profiles, 2 scope_profiles, 2 profiles, 2 samples).
function walk(b, start, end, level) {
  let sum = 0;
  const want = level === 0 ? 1 : 2;
  let i = start;
  while (i < end) {
    let k, len;
    [k, i] = varint(b, i);
    const f = Math.floor(k / 8), w = k & 7;
    if (w === 0) { [, i] = varint(b, i); continue; }
    if (w === 1) { i += 8; continue; }
    if (w === 5) { i += 4; continue; }
    if (w !== 2) throw new Error('wire type ' + w);
    [len, i] = varint(b, i);
    if (i + len > end) throw new Error('truncated');
    if (level < 4 && f === want) sum += level === 3 ? sampleValues(b, i, i + len) : walk(b, i, i + len, level + 1);
    i += len;
  }
  return sum;
}

function sampleValues(b, start, end) {
  let sum = 0, i = start;
  while (i < end) {
    let k, v, len;
    [k, i] = varint(b, i);
    const f = Math.floor(k / 8), w = k & 7;
    if (w === 0) { [v, i] = varint(b, i); if (f === 4) sum += v; continue; }
    if (w === 1) { i += 8; continue; }
    if (w === 5) { i += 4; continue; }
    [len, i] = varint(b, i);
    if (f === 4) { let j = i; while (j < i + len) { [v, j] = varint(b, j); sum += v; } }
    i += len;
  }
  return sum;
}

function answer(res, status, headers = {}) {
  st.statuses[status] = (st.statuses[status] || 0) + 1;
  res.writeHead(status, { 'content-type': 'application/x-protobuf', ...headers });
  res.end();
}

const srv = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (req.method === 'GET' && u.pathname === '/stats') {
    st.fault = fault && Date.now() < fault.until ? fault : null;
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify(st));
  }
  if (req.method === 'POST' && u.pathname === '/fault') {
    const status = Number(u.searchParams.get('status') || 200);
    fault = status === 200 ? null : { status, retryAfter: Number(u.searchParams.get('retry_after') || 0),
      until: Date.now() + Number(u.searchParams.get('seconds') || 60) * 1000 };
    res.writeHead(200);
    return res.end('ok\n');
  }
  const chunks = [];
  req.on('data', (d) => chunks.push(d));
  req.on('end', () => {
    st.requests++;
    if (req.method !== 'POST') return answer(res, 405);
    if (fault && Date.now() < fault.until)
      return answer(res, fault.status, fault.retryAfter ? { 'retry-after': String(fault.retryAfter) } : {});
    let body = Buffer.concat(chunks);
    st.bytes += body.length;
    try {
      if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
      const n = walk(body, 0, body.length, 0);
      const h = crypto.createHash('sha1').update(body).digest('base64');
      if (seen.has(h)) {
        st.redelivered++;
        st.redeliveredSamples += n;
      } else {
        seen.add(h);
        seenOrder.push(h);
        if (seenOrder.length > 1000000) seen.delete(seenOrder.shift());
        st.samples += n;
      }
    } catch (e) {
      st.decodeErrors++;
      return answer(res, 400);
    }
    answer(res, 200);
  });
});

srv.listen(Number(arg('port', 0)), '127.0.0.1', () => {
  const port = srv.address().port;
  if (arg('port-file')) fs.writeFileSync(arg('port-file'), String(port));
  process.stdout.write(`ready ${port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
