// SPDX-License-Identifier: Apache-2.0
// A Node.js workload that deoptimizes over and over, for tests/integration/agent-node-names.py:
// prints its pid, warms up until a line arrives on stdin, then spends SECONDS of CPU time (its
// own clock) in shapeWork over objects whose hidden class changes every phase (another property
// order or a double field), so the code TurboFan optimized for one phase's maps is deoptimized at
// the next and optimized again; prints "done phases=N". Run with --trace-deopt to see the
// deoptimizations (the test counts them).
'use strict';

function shapeWork(objs, n) {
  let s = 0;
  for (let r = 0; r < n; r++) {
    for (let i = 0; i < objs.length; i++) s += objs[i].a * 3 + objs[i].b;
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
