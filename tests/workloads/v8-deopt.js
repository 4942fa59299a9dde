// SPDX-License-Identifier: Apache-2.0
// A Node.js workload that deoptimizes over and over, for tests/integration/agent-node-names.py:
// prints its pid, warms up until a line arrives on stdin, then spends SECONDS of CPU time (its
// own clock) in shapeWork over objects whose hidden class changes every phase (another property
// order or a double field), so the code TurboFan optimized for one phase's maps is deoptimized at
// the next and optimized again; prints "done phases=N". Run with --trace-deopt to see the
// deoptimizations (the test counts them).
'use strict';

// Its bytecode is larger than TurboFan inlines (460 bytes in V8 11: the never-taken branch below),
// so its time stays its own frame's rather than its caller's.
function shapeWork(objs, n) {
  let s = 0;
  for (let r = 0; r < n; r++) {
    for (let i = 0; i < objs.length; i++) s += objs[i].a * 3 + objs[i].b;
  }
  if (n < 0) {
    let t = s | 0;
    t = (t * 31 + 0) ^ (t >>> 1);
    t = (t * 32 + 1) ^ (t >>> 2);
    t = (t * 33 + 2) ^ (t >>> 3);
    t = (t * 34 + 3) ^ (t >>> 4);
    t = (t * 35 + 4) ^ (t >>> 5);
    t = (t * 36 + 5) ^ (t >>> 6);
    t = (t * 37 + 6) ^ (t >>> 7);
    t = (t * 38 + 7) ^ (t >>> 8);
    t = (t * 39 + 8) ^ (t >>> 9);
    t = (t * 40 + 9) ^ (t >>> 10);
    t = (t * 41 + 10) ^ (t >>> 11);
    t = (t * 42 + 11) ^ (t >>> 12);
    t = (t * 43 + 12) ^ (t >>> 13);
    t = (t * 44 + 13) ^ (t >>> 1);
    t = (t * 45 + 14) ^ (t >>> 2);
    t = (t * 46 + 15) ^ (t >>> 3);
    t = (t * 47 + 16) ^ (t >>> 4);
    t = (t * 48 + 17) ^ (t >>> 5);
    t = (t * 49 + 18) ^ (t >>> 6);
    t = (t * 50 + 19) ^ (t >>> 7);
    t = (t * 51 + 20) ^ (t >>> 8);
    t = (t * 52 + 21) ^ (t >>> 9);
    t = (t * 53 + 22) ^ (t >>> 10);
    t = (t * 54 + 23) ^ (t >>> 11);
    t = (t * 55 + 24) ^ (t >>> 12);
    t = (t * 56 + 25) ^ (t >>> 13);
    t = (t * 57 + 26) ^ (t >>> 1);
    t = (t * 58 + 27) ^ (t >>> 2);
    t = (t * 59 + 28) ^ (t >>> 3);
    t = (t * 60 + 29) ^ (t >>> 4);
    t = (t * 61 + 30) ^ (t >>> 5);
    t = (t * 62 + 31) ^ (t >>> 6);
    t = (t * 63 + 32) ^ (t >>> 7);
    t = (t * 64 + 33) ^ (t >>> 8);
    t = (t * 65 + 34) ^ (t >>> 9);
    t = (t * 66 + 35) ^ (t >>> 10);
    t = (t * 67 + 36) ^ (t >>> 11);
    t = (t * 68 + 37) ^ (t >>> 12);
    t = (t * 69 + 38) ^ (t >>> 13);
    t = (t * 70 + 39) ^ (t >>> 1);
    s = t;
  }
  return s;
}

function make(phase, k) {
  const o = {};
  switch (phase % 3) {
    case 0: o.a = k; o.b = k + 1; break;
    case 1: o.b = k + 1; o.a = k; break;
    default: o.x = 0; o.a = k + 0.5; o.b = k; break;
  }
  return o;
}

function phaseObjects(phase) {
  const objs = [];
  for (let k = 0; k < 64; k++) objs.push(make(phase, k));
  return objs;
}

let started = false;
function warmSlice() {
  if (started) return;
  const until = process.cpuUsage().user + 20000;
  while (process.cpuUsage().user < until) shapeWork(phaseObjects(0), 10);
  setImmediate(warmSlice);
}

const budgetUs = Number(process.argv[2] || 2) * 1e6;
console.log(process.pid);
process.stdin.once('data', () => {
  started = true;
  const end = process.cpuUsage().user + budgetUs;
  let phases = 0, x = 0;
  while (process.cpuUsage().user < end) {
    const objs = phaseObjects(phases++);
    x += shapeWork(objs, 2000);
  }
  console.log('done phases=' + phases + ' x=' + (x % 10));
  process.exit(0);
});
setImmediate(warmSlice);
