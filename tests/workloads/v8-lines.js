// SPDX-License-Identifier: Apache-2.0
// A Node.js workload whose hot code sits on known lines, for the per-sample
// line of interpreted frames (tests/integration/agent-node-names.py runs it
// with --max-opt=0: Ignition only). Prints its pid, warms up until a line
// arrives on stdin, then spends SECONDS of CPU time in lineWork, whose two
// loops each take one line (marked LOOP-A and LOOP-B) and call step there:
// the frame of lineWork runs one of the two lines in every sample it is in.
'use strict';

function step(x, i) {
  return (Math.imul(x ^ i, 2654435761) + 1) | 0;
}

function lineWork(n) {
  let a = 1, b = 2;
  for (let i = 0; i < n * 3; i++) a = step(a, i) + (a >>> 5); // LOOP-A
  for (let i = 0; i < n * 2; i++) b = step(b, i) ^ (b >>> 3); // LOOP-B
  return a ^ b;
}

function run(budgetUs) {
  const end = process.cpuUsage().user + budgetUs;
  let x = 0;
  while (process.cpuUsage().user < end) x ^= lineWork(20000);
  return x;
}

let started = false;
function warmSlice() {
  if (started) return;
  const until = process.cpuUsage().user + 20000;
  while (process.cpuUsage().user < until) lineWork(100);
  setImmediate(warmSlice);
}

const budgetUs = Number(process.argv[2] || 3) * 1e6;
console.log(process.pid);
process.stdin.once('data', () => {
  started = true;
  const x = run(budgetUs);
  console.log('done x=' + (x % 10));
  process.exit(0);
});
setImmediate(warmSlice);
