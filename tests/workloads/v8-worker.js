// SPDX-License-Identifier: Apache-2.0
// A Node.js worker thread burning CPU in JavaScript, for tests/integration/agent-node.py: prints
// its pid, waits for a line on stdin, then a worker thread spends SECONDS of CPU time in spin()
// while the main thread waits for it; exits 0 when the worker has.
'use strict';
const { Worker, isMainThread, workerData } = require('worker_threads');

function spin(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + i * i) % 1000003;
  return s;
}

if (isMainThread) {
  console.log(process.pid);
  process.stdin.once('data', () => {
    const w = new Worker(__filename, { workerData: Number(process.argv[2] || 2) });
    w.on('exit', (code) => {
      console.log('done ' + code);
      process.exit(code);
    });
  });
} else {
  const end = process.cpuUsage().user + workerData * 1e6;
  let x = 0;
  while (process.cpuUsage().user < end) x += spin(100000);
}
