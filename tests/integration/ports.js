// SPDX-License-Identifier: Apache-2.0
// Free TCP ports for test servers, chosen so that nothing else takes them
// first (the same choice as ports.py, for Node tests and bench/fleet).
//
// A port found by listening on port 0 and closing is an ephemeral port: the
// kernel hands the same numbers to every other listen(0) and to outgoing
// connections, so a server started a moment later may find it taken (the
// fleet soak once started HAProxy on its sink's port, and delivered nothing).
// Ports below the kernel's ephemeral range (net.ipv4.ip_local_port_range)
// are never chosen by the kernel; one picked at random there and checked to
// bind leaves only the small chance that a test running in parallel picks
// the same one in the same moment.
'use strict';

const fs = require('node:fs');
const net = require('node:net');

const handedOut = new Set();

function ephemeralLow() {
  try { return Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]) || 32768; }
  catch (e) { return 32768; }
}

// A port on 127.0.0.1 that binds now, below the ephemeral range, not handed out before by this process.
async function freePort() {
  const high = Math.min(ephemeralLow(), 65536) - 1, low = high > 12000 ? 10000 : 1024;
  for (let i = 0; i < 1000; i++) {
    const p = low + Math.floor(Math.random() * (high - low + 1));
    if (handedOut.has(p)) continue;
    const ok = await new Promise((r) => {
      const s = net.createServer();
      s.once('error', () => r(false));
      s.listen(p, '127.0.0.1', () => s.close(() => r(true)));
    });
    if (ok) { handedOut.add(p); return p; }
  }
  throw new Error(`no free port in ${low}..${high} after 1000 tries`);
}

module.exports = { freePort };
