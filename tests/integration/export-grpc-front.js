#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// A gRPC front for tests/fakes/fake_pyroscope.py, with Node's built-in http2
// only (no gRPC library): it serves the unary method
// /opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export
// over h2c, unframes the message (5-byte prefix, gzip when flagged, as
// grpc-encoding says), forwards it to the fake's OTLP/HTTP endpoint (which
// decodes, validates and counts it), and maps the answer to grpc-status
// (200 -> 0 OK, 400 -> 3 INVALID_ARGUMENT, else 14 UNAVAILABLE), in
// trailers. --script gives grpc-status codes to answer first ("14,8,0").
// --max-message-bytes N answers RESOURCE_EXHAUSTED (8) to messages over N
// bytes, on the wire or after decompression, with grpc-go's wording
// ("grpc: received message larger than max (X vs. N)"), as a gRPC server
// with a smaller max receive size does.
//
// Usage: export-grpc-front.js --port-file FILE --backend http://127.0.0.1:PORT [--script 14,14]
//        [--max-message-bytes N]
'use strict';
const http2 = require('http2');
const http = require('http');
const zlib = require('zlib');
const fs = require('fs');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const script = (args.script || '').split(',').filter((s) => s !== '').map(Number);
const METHOD = '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export';
let calls = 0;

function forward(body, cb) {
  const u = new URL(args.backend + '/v1development/profiles');
  const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
    headers: { 'content-type': 'application/x-protobuf', 'content-length': body.length } }, (res) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => cb(res.statusCode, Buffer.concat(chunks)));
  });
  req.on('error', () => cb(0, Buffer.alloc(0)));
  req.end(body);
}

const server = http2.createServer();
server.on('stream', (stream, headers) => {
  const chunks = [];
  stream.on('data', (c) => chunks.push(c));
  stream.on('end', () => {
    calls++;
    const reply = (code, msg, payload) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': String(code), 'grpc-message': msg || '' }));
      if (payload !== undefined) {
        const frame = Buffer.alloc(5 + payload.length);
        frame.writeUInt32BE(payload.length, 1);
        payload.copy(frame, 5);
        stream.end(frame);
      } else {
        stream.end();
      }
    };
    if (headers[':path'] !== METHOD) return reply(12, 'unimplemented');
    if (headers['content-type'] !== 'application/grpc') return reply(3, 'content-type');
    if (script.length) return reply(script.shift(), 'scripted');
    const buf = Buffer.concat(chunks);
    if (buf.length < 5) return reply(3, 'short message');
    const max = args['max-message-bytes'] ? Number(args['max-message-bytes']) : Infinity;
    let msg = buf.subarray(5, 5 + buf.readUInt32BE(1));
    if (msg.length > max) {
      return reply(8, `grpc: received message larger than max (${msg.length} vs. ${max})`);
    }
    if (buf[0] === 1) {
      if (headers['grpc-encoding'] !== 'gzip') return reply(3, 'compressed without grpc-encoding');
      msg = zlib.gunzipSync(msg);
      if (msg.length > max) {
        return reply(8, `grpc: received message after decompression larger than max (${msg.length} vs. ${max})`);
      }
    }
    forward(msg, (status, body) => {
      if (status === 200) reply(0, '', body.length ? body : Buffer.alloc(0));
      else reply(status === 400 ? 3 : 14, 'backend ' + status + ': ' + body.toString().trim());
    });
  });
});
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(args['port-file'] + '.tmp', String(server.address().port));
  fs.renameSync(args['port-file'] + '.tmp', args['port-file']);
});
// Bounded, like every test fake.
setTimeout(() => process.exit(0), 120000).unref();
process.on('SIGTERM', () => process.exit(0));
