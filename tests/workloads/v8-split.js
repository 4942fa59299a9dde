// SPDX-License-Identifier: Apache-2.0
// A Node.js workload with a known split for the V8 tests (tests/integration/agent-node.py):
// prints its pid, then warms up (warmUp, in slices that let stdin in) until a line arrives on
// stdin, so the agent can load the node binary's unwind table while it runs; then spends
// SECONDS of CPU time (its own clock, not wall time) in rounds that call alphaWork and
// betaWork through a few frames, timing each call with process.hrtime, and prints
// "done alpha_ns=A beta_ns=B". Each round's length is drawn at random (the same ratio every
// round), so rounds do not beat with the sampling rate.
//
// Both hot functions are leaves whose bytecode is larger than TurboFan inlines (460 bytes in
// V8 11), so their time stays their own frames' in any profiler.
'use strict';

function alphaWork(n) {
  let a = 1, b = 2, c = 3, d = 4;
  for (let i = 0; i < n; i++) {
    switch (i & 15) {
      case 0: a = Math.imul(a ^ i, 2654435761) + b; break;
      case 1: b = Math.imul(b + a, 40503) ^ (c >>> 3); break;
      case 2: c = (c + Math.imul(d, 69069) + 1) | 0; break;
      case 3: d = (d ^ (a << 5)) + (b >>> 7); break;
      case 4: a = (a + Math.imul(c, 1103515245) + 12345) | 0; break;
      case 5: b = (b ^ (d >>> 11)) + Math.imul(a, 3); break;
      case 6: c = Math.imul(c ^ (c >>> 15), 2246822519) | 0; break;
      case 7: d = Math.imul(d ^ (d >>> 13), 3266489917) + a; break;
      case 8: a = (a ^ (b << 7)) - Math.imul(c, 5); break;
      case 9: b = Math.imul(b ^ (b >>> 16), 73244475) | 0; break;
      case 10: c = (c - (d << 3) + Math.imul(a, 9)) | 0; break;
      case 11: d = (d + (c ^ (b >>> 2))) | 0; break;
      case 12: a = Math.imul(a + d, 2246822507) ^ (b >>> 1); break;
      case 13: b = (b + Math.imul(c ^ d, 3266489909)) | 0; break;
      case 14: c = (c ^ (a >>> 9)) + Math.imul(b, 7); break;
      default: d = Math.imul(d + (a ^ c), 668265263) | 0; break;
    }
  }
  return (a ^ b ^ c ^ d) >>> 0;
}

function betaWork(n) {
  let x = 0.5, y = 1.25, z = 2.75, w = 0.125;
  for (let i = 0; i < n; i++) {
    switch (i & 15) {
      case 0: x = x * 0.999 + y * 0.001 + 0.5; break;
      case 1: y = (y + z) * 0.5 - w * 0.25; break;
      case 2: z = z * 1.0001 - x * 0.0001 + 0.25; break;
      case 3: w = (w + x * 0.5) * 0.75; break;
      case 4: x = x - (y * y) * 0.0001 + 1.5; break;
      case 5: y = y * 0.9 + (z - w) * 0.1; break;
      case 6: z = (z + x + y) / 3.0001; break;
      case 7: w = w * 0.5 + (x - z) * 0.25 + 0.125; break;
      case 8: x = (x * 1.5 + w) / 2.5; break;
      case 9: y = y - x * 0.001 + z * 0.002; break;
      case 10: z = z * 0.95 + w * 0.05 + 0.75; break;
      case 11: w = (w * w + 1) / (w + 2); break;
      case 12: x = x + (y - w) * 0.01; break;
      case 13: y = (y * 3 + x) * 0.25; break;
      case 14: z = z - (z - x) * 0.125; break;
      default: w = w + (y - z) * 0.0625 + 0.5; x = x * 0.5 + w * 0.25; y = y + x * 0.125 - z * 0.0625; break;
    }
  }
  return x + y + z + w;
}

let alphaNs = 0n;
let betaNs = 0n;

function timedAlpha(n) {
  const t0 = process.hrtime.bigint();
  const r = alphaWork(n);
  alphaNs += process.hrtime.bigint() - t0;
  return r;
}

function timedBeta(n) {
  const t0 = process.hrtime.bigint();
  const r = betaWork(n);
  betaNs += process.hrtime.bigint() - t0;
  return r;
}

function round(len) {
  // About 60:40 of the time (betaWork's iteration costs about what alphaWork's does).
  return timedAlpha(len * 3) + timedBeta(len * 2);
}

// The budget is checked every 8 rounds: node --cpu-prof puts 4-6 % of its samples on
// process.cpuUsage() (a system call) when it is checked every round, where a cpu-clock profiler
// puts under 1 %, and the comparison of the two (tests/integration/agent-node-names.py) is about
// alphaWork and betaWork.
function run(budgetUs) {
  const end = process.cpuUsage().user + budgetUs;
  let x = 0;
  while (process.cpuUsage().user < end) {
    for (let i = 0; i < 8; i++) x += round(20000 + Math.floor(Math.random() * 40000));
  }
  return x;
}

function warmUp() {
  let s = 0;
  for (let i = 0; i < 200000; i++) s = (s + i * i) % 1000003;
  return s;
}

let started = false;
function warmSlice() {
  if (started) return;
  const until = process.cpuUsage().user + 20000;
  while (process.cpuUsage().user < until) warmUp();
  setImmediate(warmSlice);
}

const budgetUs = Number(process.argv[2] || 3) * 1e6;
console.log(process.pid);
process.stdin.once('data', () => {
  started = true;
  const x = run(budgetUs);
  console.log('done alpha_ns=' + alphaNs + ' beta_ns=' + betaNs + ' x=' + (x % 10));
  process.exit(0);
});
setImmediate(warmSlice);
