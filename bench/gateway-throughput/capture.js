#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// A stand-in gateway for recording (run.py): an h2c agent-protocol endpoint,
// Node's built-in http2 only, that accepts every push and asks the agent for
// the symbol table of every executable and kernel it defines (wanted_symbols,
// and every probed ID at the agent's exit), as a gateway that has none of them
// would. The agent answers with the tables it extracts on the node
// (agent/symupload.c: .symtab, .dynsym, MiniDebugInfo, .gopclntab, kallsyms,
// or an `error` when it cannot read the file); they are appended to OUT as
// varint-delimited stackrelay.v1.SymbolTable messages, exactly as uploaded,
// so replay.js can upload them again when a gateway asks.
//
// Usage: capture.js PORT_FILE OUT [--max-seconds 900]
// Writes the port it listens on (127.0.0.1) to PORT_FILE. Prints one JSON
// line of counts to stdout when it gets SIGTERM.
'use strict';
const http2 = require('http2');
const zlib = require('zlib');
const fs = require('fs');

const [portFile, outPath] = process.argv.slice(2);
if (!portFile || !outPath) {
  console.error('usage: capture.js PORT_FILE OUT [--max-seconds N]');
  process.exit(2);
}
const maxIdx = process.argv.indexOf('--max-seconds');
const maxSeconds = maxIdx > 0 ? Number(process.argv[maxIdx + 1]) : 900;

const { putVarint, fields } = require('./wire');
const bytesField = (f, b) => Buffer.concat([putVarint(f * 8 + 2), putVarint(b.length), b]);

const out = fs.openSync(outPath, 'w');
const asked = new Set(); // IDs (hex) listed in wanted_symbols once
const have = new Set(); // IDs (hex) whose table (or error) arrived
const stats = { requests: 0, samples: 0, tables: 0, error_tables: 0, table_bytes: 0, wanted: 0 };

function handle(req) {
  let accepted = 0;
  const want = [];
  const ask = (id) => {
    const h = id.toString('hex');
    if (!asked.has(h) && !have.has(h)) {
      asked.add(h);
      want.push(Buffer.from(id));
    }
  };
  for (const x of fields(req)) {
    if (x.f === 5) {
      const c = fields(x.body).find((y) => y.f === 8);
      accepted += c ? c.val : 1;
    } else if (x.f === 7 || x.f === 8) {
      const id = fields(x.body).find((y) => y.f === 1);
      if (id && id.body.length) ask(id.body);
    } else if (x.f === 9) {
      const t = fields(x.body);
      const id = t.find((y) => y.f === 1);
      if (!id || have.has(id.body.toString('hex'))) continue;
      have.add(id.body.toString('hex'));
      fs.writeSync(out, Buffer.concat([putVarint(x.body.length), x.body]));
      stats.tables++;
      stats.table_bytes += x.body.length;
      if (t.some((y) => y.f === 4 && y.body.length)) stats.error_tables++;
    } else if (x.f === 11) {
      // A probe at exit: anything still without a table is wanted (again, in case an answer was lost).
      const h = x.body.toString('hex');
      if (!have.has(h)) {
        asked.delete(h);
        ask(x.body);
      }
    }
  }
  stats.requests++;
  stats.samples += accepted;
  stats.wanted += want.length;
  const parts = [Buffer.from([0x08, 0x01, 0x10]), putVarint(accepted)];
  for (const id of want) parts.push(bytesField(6, id));
  return Buffer.concat(parts);
}

const server = http2.createServer();
server.on('stream', (s, headers) => {
  const chunks = [];
  s.on('data', (c) => chunks.push(c));
  s.on('end', () => {
    let body = Buffer.concat(chunks), resp;
    try {
      if (headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
      resp = handle(body);
    } catch (e) {
      s.respond({ ':status': 400 });
      s.end();
      return;
    }
    s.respond({ ':status': 200, 'content-type': 'application/x-protobuf' });
    s.end(resp);
  });
  s.on('error', () => {});
});
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(portFile + '.tmp', String(server.address().port));
  fs.renameSync(portFile + '.tmp', portFile);
});
const stop = () => {
  fs.closeSync(out);
  console.log(JSON.stringify(stats));
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
setTimeout(stop, maxSeconds * 1000).unref();
