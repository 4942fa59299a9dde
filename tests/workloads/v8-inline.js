// SPDX-License-Identifier: Apache-2.0
// A Node.js workload for optimized frames' lines and inlined functions
// (tests/integration/agent-node-names.py runs it with node's default flags).
// Prints its pid, warms up until a line arrives on stdin, then spends SECONDS
// of CPU time calling inlineWork in short batches, one per turn of the event
// loop, so that inlineWork runs in its optimized code (called thousands of
// times, not replaced on the stack in a long loop). Its two loops each take
// one line (LOOP-A, LOOP-B); the first calls mix, small enough that TurboFan
// inlines it: a sample there is in mix (line MIX) inlined in inlineWork.
'use strict';

function mix(x, i) {
  return (Math.imul(x ^ i, 2654435761) + (x >>> 7)) | 0; // MIX
}

function inlineWork(n) {
  let a = 1, b = 2;
  for (let i = 0; i < n; i++) a = mix(a, i) ^ (a >>> 5); // LOOP-A
  for (let i = 0; i < n; i++) b = (Math.imul(b + i, 69069) ^ (b >>> 3)) | 0; // LOOP-B
  return a ^ b;
}

let x = 0;
function batch(endUs) {
  for (let k = 0; k < 20; k++) x ^= inlineWork(3000);
  if (process.cpuUsage().user < endUs) {
    setImmediate(batch, endUs);
  } else {
    console.log('done x=' + (x % 10));
    process.exit(0);
  }
}

let started = false;
function warmSlice() {
  if (started) return;
  const until = process.cpuUsage().user + 20000;
  while (process.cpuUsage().user < until) x ^= inlineWork(100);
  setImmediate(warmSlice);
}

const budgetUs = Number(process.argv[2] || 3) * 1e6;
console.log(process.pid);
process.stdin.once('data', () => {
  started = true;
  setImmediate(batch, process.cpuUsage().user + budgetUs);
});
setImmediate(warmSlice);
