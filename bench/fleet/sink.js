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

// The protobuf reader: a varint at b[pos], leaving pos after it (no array per value: the sink reads every
// sample of every export, and an allocation per varint made it cost as much as a simulator process).
let pos = 0;
function varint(b) {
  let v = 0, m = 1;
  for (;;) {
    const c = b[pos++];
    if (c === undefined) throw new Error('truncated varint');
    v += (c & 0x7f) * m;
    if (c < 0x80) return v;
    m *= 128;
  }
}
// Skips a field's value of wire type w; returns a length-delimited field's length (pos at its body), else -1.
function value(b, w, end) {
  if (w === 0) { varint(b); return -1; }
  if (w === 1) { pos += 8; return -1; }
  if (w === 5) { pos += 4; return -1; }
  if (w !== 2) throw new Error('wire type ' + w);
  const len = varint(b);
  if (pos + len > end) throw new Error('truncated');
  return len;
}

// Sums the values of every Sample: fields by level (1 resource_profiles, 2 scope_profiles, 2 profiles, 2 samples).
function walk(b, start, end, level) {
  let sum = 0;
  const want = level === 0 ? 1 : 2;
  pos = start;
  while (pos < end) {
    const k = varint(b);
    const len = value(b, k & 7, end);
    if (len < 0) continue;
    const at = pos;
    if (level < 4 && Math.floor(k / 8) === want) sum += level === 3 ? sampleValues(b, at, at + len) : walk(b, at, at + len, level + 1);
    pos = at + len;
  }
  return sum;
}

function sampleValues(b, start, end) {
  let sum = 0;
  pos = start;
  while (pos < end) {
    const k = varint(b);
    const f = Math.floor(k / 8), w = k & 7;
    if (w === 0 && f === 4) { sum += varint(b); continue; }
    const len = value(b, w, end);
    if (len < 0) continue;
    const at = pos;
    if (f === 4) while (pos < at + len) sum += varint(b);
    pos = at + len;
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
