// SPDX-License-Identifier: Apache-2.0
// A known hot JavaScript function for the perf-map test (tests/integration/agent-perfmap.py):
// prints its pid, waits for a line on stdin, then spends SECONDS of CPU time (not wall time)
// calling hotFunction, and prints "done". Run with node --perf-basic-prof so V8 writes
// /tmp/perf-PID.map.
'use strict';

function hotFunction(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + i * i) % 1000003;
  return s;
}

const budgetUs = Number(process.argv[2] || 3) * 1e6;
console.log(process.pid);
process.stdin.once('data', () => {
  const end = process.cpuUsage().user + budgetUs;
  let x = 0;
  while (process.cpuUsage().user < end) x += hotFunction(200000);
  console.log('done ' + (x % 10));
  process.exit(0);
});
