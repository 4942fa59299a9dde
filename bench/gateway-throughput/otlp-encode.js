#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// Turns recorded agent traffic (varint-delimited stackrelay.v1.PushRequest, as
// `stackrelay-agent --output FILE` writes it) into the same profiles as OTLP
// ExportProfilesServiceRequests (profiles v1.10), as the OpenTelemetry eBPF
// profiler would send them, so run.py can replay the same content through the
// gateway's `otlp` receiver beside the agent protocol. The encoder is this file
// (field numbers from proto/opentelemetry, written with wire.js), not the
// gateway's.
//
// One request per recorded window that has CPU samples, with its own
// dictionary (as the OTel profiler sends them): one ResourceProfiles per
// container ID (resource attributes host.name and container.id), one Profile
// (sample type samples/count, period type cpu/nanoseconds at the recording's
// frequency, the window's first start and last end time), one Sample per
// agent sample record: values [count], attributes process.pid, thread.id,
// thread.name. Frames:
// - user frames: a location with the address and no lines on a mapping named
//   by the executable's path with process.executable.build_id.gnu (hex), as
//   the OTel profiler leaves native frames: the gateway's symbolize names them;
// - kernel frames: named here from the kernel's symbol table in --symbols (the
//   kallsyms snapshot the agent uploaded), as the OTel profiler names kernel
//   frames on the host (a location with a line, profile.frame.type kernel);
//   without a table they go without lines (the gateway writes [kernel]+0x...);
// - frames the agent could not attribute: a location without a mapping.
// Off-CPU sample records (the agent's off-CPU profile) are left out and counted.
//
// Usage: otlp-encode.js --recording FILE --out FILE [--symbols FILE]
// Writes FILE (varint-delimited requests) and FILE.json (per request: sample
// records, CPU samples, frames), prints one JSON line of totals.
'use strict';
const fs = require('fs');
const { varint, putVarint, fields } = require('./wire');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
if (!args.recording || !args.out) {
  console.error('usage: otlp-encode.js --recording FILE --out FILE [--symbols FILE]');
  process.exit(2);
}

function* delimited(b) {
  for (let i = 0; i < b.length;) {
    let l;
    [l, i] = varint(b, i);
    yield b.subarray(i, i + l);
    i += l;
  }
}
const get = (fs_, f) => fs_.find((x) => x.f === f);
const str = (x) => (x && x.body ? x.body.toString() : '');

// ---- encoding ----
const key = (f, w) => putVarint(f * 8 + w);
const vint = (f, v) => Buffer.concat([key(f, 0), putVarint(v)]);
const bytes = (f, b) => Buffer.concat([key(f, 2), putVarint(b.length), b]);
const msg = (f, parts) => bytes(f, Buffer.concat(parts));
const s = (f, t) => bytes(f, Buffer.from(t));
function fixed64(f, v) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return Buffer.concat([key(f, 1), b]);
}
// Addresses are 64-bit (kernel addresses are above 2^53): BigInt, not wire.js's Numbers.
function putBigVarint(v) {
  const out = [];
  do {
    let c = Number(v & 0x7fn);
    v >>= 7n;
    if (v) c |= 0x80;
    out.push(c);
  } while (v);
  return Buffer.from(out);
}
function bigVarint(b, i) {
  let v = 0n, sh = 0n;
  for (;;) {
    const c = b[i++];
    v |= BigInt(c & 0x7f) << sh;
    sh += 7n;
    if (c < 0x80) return v;
  }
}
const vbig = (f, v) => Buffer.concat([key(f, 0), putBigVarint(v)]);
const packed = (f, vs) => (vs.length ? bytes(f, Buffer.concat(vs.map(putVarint))) : Buffer.alloc(0));

// ---- the recording ----
const stacks = new Map(); // stack ID hex -> [{ exe: hex, address, kind }]
const exes = new Map(); // executable ID hex -> { build: hex or '', path }
const windows = []; // { samples: [fields], start, end }
let freq = 97;
for (const req of delimited(fs.readFileSync(args.recording))) {
  const w = { samples: [], start: 0, end: 0 };
  for (const x of fields(req)) {
    if (x.f === 4) freq = x.val || freq;
    else if (x.f === 5) w.samples.push(fields(x.body));
    else if (x.f === 6) {
      const sf = fields(x.body);
      const id = get(sf, 1);
      if (!id) continue;
      stacks.set(id.body.toString('hex'), sf.filter((y) => y.f === 2).map((y) => {
        const ff = fields(y.body);
        const e = get(ff, 1), a = get(ff, 2), k = get(ff, 3);
        // a.raw is the key (1 byte) and the varint.
        return { exe: e ? e.body.toString('hex') : '', address: a ? bigVarint(a.raw, 1) : 0n, kind: k ? k.val : 0 };
      }));
    } else if (x.f === 7) {
      const d = fields(x.body);
      const id = get(d, 1), kind = get(d, 2), gnu = get(d, 6);
      if (!id) continue;
      const build = kind && kind.val === 1 ? id.body.toString('hex') : (gnu ? gnu.body.toString('hex') : '');
      exes.set(id.body.toString('hex'), { build, path: str(get(d, 4)) || str(get(d, 3)) });
    }
  }
  if (w.samples.length) windows.push(w);
}
// Kernel symbol tables (sorted by address) from the agent's uploads.
const ksyms = new Map(); // kernel ID hex -> { addr: [], size: [], name: [] }
if (args.symbols) {
  for (const t of delimited(fs.readFileSync(args.symbols))) {
    const tf = fields(t);
    const id = get(tf, 1);
    if (!id) continue;
    const syms = tf.filter((y) => y.f === 2).map((y) => {
      const sf = fields(y.body);
      const a = get(sf, 1), z = get(sf, 2);
      return [a ? bigVarint(a.raw, 1) : 0n, z ? bigVarint(z.raw, 1) : 0n, str(get(sf, 3))];
    }).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    ksyms.set(id.body.toString('hex'), syms);
  }
}
function kernelName(id, address) {
  const t = ksyms.get(id);
  if (!t || !t.length) return null;
  let lo = 0, hi = t.length - 1;
  if (address < t[0][0]) return null;
  while (lo < hi) { // last symbol starting at or below address
    const mid = (lo + hi + 1) >> 1;
    if (t[mid][0] <= address) lo = mid; else hi = mid - 1;
  }
  const [a, size, name] = t[lo];
  return size === 0n || address < a + size ? name : null;
}

// ---- one request per window ----
const kernelLocations = [0, 0]; // named, not (over every request's location_table)
function encodeWindow(w) {
  const strings = [''], strIdx = new Map([['', 0]]);
  const si = (t) => {
    if (!strIdx.has(t)) { strIdx.set(t, strings.length); strings.push(t); }
    return strIdx.get(t);
  };
  const attrs = [], attrIdx = new Map(); // attribute_table (index 0 must be the zero value)
  const attr = (k, v) => {
    const h = k + '\0' + typeof v + '\0' + v;
    if (!attrIdx.has(h)) {
      if (!attrs.length) attrs.push(Buffer.alloc(0));
      const any = typeof v === 'number' ? vint(3, v) : s(1, v);
      attrIdx.set(h, attrs.length);
      attrs.push(Buffer.concat([vint(1, si(k)), msg(2, [any])]));
    }
    return attrIdx.get(h);
  };
  const mappings = [Buffer.alloc(0)], mapIdx = new Map();
  const locations = [Buffer.alloc(0)], locIdx = new Map();
  const functions = [Buffer.alloc(0)], funIdx = new Map();
  const stackTab = [Buffer.alloc(0)], stackIdx = new Map();
  const mapping = (exe) => {
    if (!mapIdx.has(exe)) {
      const e = exes.get(exe) || { build: '', path: '' };
      const a = e.build ? [attr('process.executable.build_id.gnu', e.build)] : [];
      mapIdx.set(exe, mappings.length);
      mappings.push(Buffer.concat([vint(4, si(e.path || '[unknown]')), packed(5, a)]));
    }
    return mapIdx.get(exe);
  };
  const fn = (name) => {
    if (!funIdx.has(name)) {
      funIdx.set(name, functions.length);
      functions.push(Buffer.concat([vint(1, si(name)), vint(2, si(name))]));
    }
    return funIdx.get(name);
  };
  const location = (fr) => {
    const h = fr.exe + ':' + fr.kind + ':' + fr.address;
    if (!locIdx.has(h)) {
      const parts = [];
      if (fr.kind === 2) { // kernel: named on the host, like the OTel profiler does
        const name = kernelName(fr.exe, fr.address);
        kernelLocations[name ? 0 : 1]++;
        parts.push(vbig(2, fr.address));
        if (name) parts.push(msg(3, [vint(1, fn(name))]));
        parts.push(packed(4, [attr('profile.frame.type', 'kernel')]));
      } else if (fr.kind === 1 && fr.exe) {
        parts.push(vint(1, mapping(fr.exe)), vbig(2, fr.address), packed(4, [attr('profile.frame.type', 'native')]));
      } else {
        parts.push(vbig(2, fr.address), packed(4, [attr('profile.frame.type', 'native')]));
      }
      locIdx.set(h, locations.length);
      locations.push(Buffer.concat(parts));
    }
    return locIdx.get(h);
  };
  const stack = (id) => {
    if (!stackIdx.has(id)) {
      const frames = stacks.get(id) || [];
      stackIdx.set(id, stackTab.length);
      stackTab.push(packed(1, frames.map(location)));
    }
    return stackIdx.get(id);
  };
  const byContainer = new Map();
  let records = 0, samples = 0, frames = 0, offcpu = 0, start = 0, end = 0;
  for (const sf of w.samples) {
    const pt = get(sf, 14);
    if (pt && pt.val === 2) { offcpu++; continue; }
    const id = get(sf, 1) ? get(sf, 1).body.toString('hex') : '';
    const count = get(sf, 8) ? get(sf, 8).val : 1;
    const a = [];
    if (get(sf, 2)) a.push(attr('process.pid', get(sf, 2).val));
    if (get(sf, 3)) a.push(attr('thread.id', get(sf, 3).val));
    if (str(get(sf, 4))) a.push(attr('thread.name', str(get(sf, 4))));
    const t0 = get(sf, 9), t1 = get(sf, 10);
    const st = t0 ? Number(Buffer.from(t0.raw.subarray(1)).readBigUInt64LE()) : 0;
    const en = t1 ? Number(Buffer.from(t1.raw.subarray(1)).readBigUInt64LE()) : 0;
    if (st && (!start || st < start)) start = st;
    if (en > end) end = en;
    const c = str(get(sf, 7));
    if (!byContainer.has(c)) byContainer.set(c, []);
    byContainer.get(c).push(Buffer.concat([vint(1, stack(id)), packed(2, a), packed(4, [count])]));
    records++;
    samples += count;
    frames += (stacks.get(id) || []).length;
  }
  if (!records) return { offcpu };
  const period = Math.round(1e9 / freq);
  const rps = [];
  for (const [c, smp] of byContainer) {
    const rattrs = [msg(1, [s(1, 'host.name'), msg(2, [s(1, 'replay-otlp')])])];
    if (c) rattrs.push(msg(1, [s(1, 'container.id'), msg(2, [s(1, c)])]));
    const profile = Buffer.concat([msg(1, [vint(1, si('samples')), vint(2, si('count'))]),
      ...smp.map((x) => bytes(2, x)), fixed64(3, start || 1), vint(4, Math.max(end - start, 0)),
      msg(5, [vint(1, si('cpu')), vint(2, si('nanoseconds'))]), vint(6, period)]);
    rps.push(msg(1, [msg(1, rattrs), msg(2, [bytes(2, profile)])]));
  }
  const dict = Buffer.concat([...mappings.map((m) => bytes(1, m)), ...locations.map((l) => bytes(2, l)),
    ...functions.map((f) => bytes(3, f)), ...strings.map((t) => s(5, t)), ...attrs.map((a) => bytes(6, a)),
    ...stackTab.map((t) => bytes(7, t))]);
  return { body: Buffer.concat([...rps, bytes(2, dict)]), records, samples, frames, offcpu };
}

const out = [], meta = [];
const totals = { requests: 0, records: 0, samples: 0, frames: 0, bytes: 0, offcpu_records: 0,
  kernel_locations_named: 0, kernel_locations_unnamed: 0 };
for (const w of windows) {
  const r = encodeWindow(w);
  totals.offcpu_records += r.offcpu;
  if (!r.body) continue;
  out.push(putVarint(r.body.length), r.body);
  meta.push({ records: r.records, samples: r.samples, frames: r.frames });
  totals.requests++;
  totals.records += r.records;
  totals.samples += r.samples;
  totals.frames += r.frames;
  totals.bytes += r.body.length;
}
if (!totals.requests) {
  console.error('otlp-encode.js: no CPU samples in ' + args.recording);
  process.exit(1);
}
[totals.kernel_locations_named, totals.kernel_locations_unnamed] = kernelLocations;
fs.writeFileSync(args.out, Buffer.concat(out));
fs.writeFileSync(args.out + '.json', JSON.stringify(meta));
console.log(JSON.stringify(totals));
