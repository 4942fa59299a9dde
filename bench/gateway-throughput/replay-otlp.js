#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// Replays OTLP ExportProfilesServiceRequests (varint-delimited, as otlp-encode.js
// writes them, with FILE.json beside) to a gateway's `otlp` receiver, as many
// OTel profilers would, with Node's built-in http2 only: --agents connections,
// --inflight requests at once on each, one request per recorded window in turn,
// for --seconds. Bodies are gzipped (level 1) once at start: an OTLP request
// carries no sequence number, so the same window is the same bytes, and the
// client spends its time sending, not compressing.
//
// --protocol http (default): OTLP/HTTP over h2c, POST /v1development/profiles,
// Content-Encoding: gzip. --protocol http1: the same over HTTP/1.1 keep-alive
// connections (--agents x --inflight of them, one request at a time each).
// --protocol grpc: OTLP/gRPC, one length-prefixed message per call with the
// compressed flag, grpc-encoding: gzip.
//
// Usage: replay-otlp.js --requests FILE --url http://HOST:PORT [--agents 16] [--seconds 10] [--inflight 4]
//                       [--protocol http|http1|grpc]
// Prints one JSON line: requests by status (gRPC: "grpc-N"), sample records, CPU samples and frames in the
// accepted requests (a partial success subtracts nothing: the run checks that none happened), profiles
// rejected by partial success, body bytes on the wire (gzip) and before compression.
'use strict';
const http = require('http');
const http2 = require('http2');
const zlib = require('zlib');
const fs = require('fs');
const { varint, fields } = require('./wire');

const args = { agents: '16', seconds: '10', inflight: '4', protocol: 'http' };
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
if (!args.requests || !args.url || !['http', 'http1', 'grpc'].includes(args.protocol)) {
  console.error('usage: replay-otlp.js --requests FILE --url http://HOST:PORT [--agents N] [--seconds S] ' +
    '[--inflight N] [--protocol http|http1|grpc]');
  process.exit(2);
}
const grpc = args.protocol === 'grpc';
const b = fs.readFileSync(args.requests);
const meta = JSON.parse(fs.readFileSync(args.requests + '.json'));
const reqs = [];
for (let i = 0, k = 0; i < b.length; k++) {
  let l;
  [l, i] = varint(b, i);
  const plain = b.subarray(i, i + l);
  i += l;
  let z = zlib.gzipSync(plain, { level: 1 });
  if (grpc) {
    const h = Buffer.alloc(5);
    h[0] = 1;
    h.writeUInt32BE(z.length, 1);
    z = Buffer.concat([h, z]);
  }
  reqs.push({ z, plain: plain.length, ...meta[k] });
}
if (!reqs.length) {
  console.error('replay-otlp.js: no requests in ' + args.requests);
  process.exit(1);
}
const headers = grpc
  ? { ':method': 'POST', ':path': '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export',
    'content-type': 'application/grpc', 'grpc-encoding': 'gzip', te: 'trailers' }
  : { ':method': 'POST', ':path': '/v1development/profiles', 'content-type': 'application/x-protobuf',
    'content-encoding': 'gzip' };

// ExportProfilesServiceResponse.partial_success.rejected_profiles (a gRPC answer has its 5-byte prefix).
function rejected(resp) {
  try {
    const m = grpc ? resp.subarray(5) : resp;
    const ps = fields(m).find((y) => y.f === 1);
    const r = ps && fields(ps.body).find((y) => y.f === 1);
    return r ? r.val : 0;
  } catch (e) {
    return 0;
  }
}

const stats = { requests: 0, statuses: {}, records: 0, samples: 0, frames: 0, wire_bytes: 0, plain_bytes: 0,
  rejected_profiles: 0, errors: 0 };
const n = Number(args.agents), inflight = Number(args.inflight);
const deadline = Date.now() + Number(args.seconds) * 1000;
const u = new URL(args.url);
let live = n;

function startSender(k) {
  const s = http2.connect(u.origin);
  s.on('error', () => { stats.errors++; });
  let next = k % reqs.length, busy = 0, done = false;
  const pump = () => {
    while (busy < inflight && Date.now() < deadline) {
      const w = reqs[next];
      next = (next + 1) % reqs.length;
      busy++;
      const r = s.request(headers);
      let status = 0;
      const resp = [];
      r.on('response', (h) => {
        status = grpc && h['grpc-status'] !== undefined ? 'grpc-' + h['grpc-status'] : h[':status'];
      });
      r.on('trailers', (h) => { if (grpc) status = 'grpc-' + h['grpc-status']; });
      r.on('data', (c) => { resp.push(c); });
      r.on('end', () => {
        stats.requests++;
        stats.statuses[status] = (stats.statuses[status] || 0) + 1;
        const ok = grpc ? status === 'grpc-0' : status === 200;
        if (ok) {
          stats.records += w.records;
          stats.samples += w.samples;
          stats.frames += w.frames;
          stats.rejected_profiles += rejected(Buffer.concat(resp));
        }
        stats.wire_bytes += w.z.length;
        stats.plain_bytes += w.plain;
        busy--;
        pump();
      });
      r.on('error', () => { stats.errors++; busy--; pump(); });
      r.end(w.z);
    }
    if (busy === 0 && !done && Date.now() >= deadline) {
      done = true;
      s.close();
      if (--live === 0) console.log(JSON.stringify(stats));
    }
  };
  pump();
}
// OTLP/HTTP over HTTP/1.1 (what the Collector's otlphttp exporter and the SDKs use): no multiplexing and
// Node does not pipeline, so --agents x --inflight keep-alive connections, one request at a time on each.
function startSender1(k) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let next = k % reqs.length;
  const one = () => {
    if (Date.now() >= deadline) {
      agent.destroy();
      if (--live === 0) console.log(JSON.stringify(stats));
      return;
    }
    const w = reqs[next];
    next = (next + 1) % reqs.length;
    const r = http.request({ host: u.hostname, port: u.port, method: 'POST', path: '/v1development/profiles', agent,
      headers: { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip', 'content-length': w.z.length } },
    (res) => {
      const resp = [];
      res.on('data', (c) => { resp.push(c); });
      res.on('end', () => {
        stats.requests++;
        stats.statuses[res.statusCode] = (stats.statuses[res.statusCode] || 0) + 1;
        if (res.statusCode === 200) {
          stats.records += w.records;
          stats.samples += w.samples;
          stats.frames += w.frames;
          stats.rejected_profiles += rejected(Buffer.concat(resp));
        }
        stats.wire_bytes += w.z.length;
        stats.plain_bytes += w.plain;
        one();
      });
    });
    r.on('error', () => { stats.errors++; one(); });
    r.end(w.z);
  };
  one();
}
if (args.protocol === 'http1') {
  live = n * inflight;
  for (let k = 0; k < n * inflight; k++) startSender1(k);
} else {
  for (let k = 0; k < n; k++) startSender(k);
}
// Bounded, like every bench helper.
setTimeout(() => { console.error('replay-otlp.js: gave up waiting for answers'); process.exit(1); },
  (Number(args.seconds) + 60) * 1000).unref();
