// SPDX-License-Identifier: Apache-2.0
// The protobuf wire format as the gateway-throughput scripts need it (capture.js,
// replay.js): recorded requests are taken apart and put together field by field.
'use strict';

// A varint at b[i]: [value, index after it].
function varint(b, i) {
  let v = 0, m = 1;
  for (;;) {
    const c = b[i++];
    v += (c & 0x7f) * m;
    m *= 128;
    if (c < 0x80) return [v, i];
  }
}

function putVarint(v) {
  const out = [];
  do {
    let c = v % 128;
    v = Math.floor(v / 128);
    if (v) c |= 0x80;
    out.push(c);
  } while (v);
  return Buffer.from(out);
}

// Top-level fields of a message: [{ f, raw (key + value bytes), val (varint) or body (bytes) }].
function fields(m) {
  const out = [];
  let j = 0;
  while (j < m.length) {
    const start = j;
    let key, v, body;
    [key, j] = varint(m, j);
    const f = Math.floor(key / 8), w = key & 7;
    if (w === 0) [v, j] = varint(m, j);
    else if (w === 1) j += 8;
    else if (w === 5) j += 4;
    else if (w === 2) {
      let l;
      [l, j] = varint(m, j);
      body = m.subarray(j, j + l);
      j += l;
    } else throw new Error('bad wire type ' + w);
    out.push({ f, raw: m.subarray(start, j), val: v, body });
  }
  return out;
}

module.exports = { varint, putVarint, fields };
