#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// Fleet soak: simulated nodes (sim.js) → HAProxy (TCP, round robin) → gateway
// replicas (receivers.agent → memory_limiter, k8s_attributes, symbolize,
// batch → otlp_http with a disk queue) → sink.js, with pods churning at the
// fake Kubernetes API server (tests/fakes/fake-kube-apiserver.js), and
// faults on a schedule. See bench/fleet/README.md for the options, what is
// measured and the pass criteria; docs/reliability.md ("Fleet scale") for figures.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const http = require('node:http');
const readline = require('node:readline');
const { spawn, execFileSync } = require('node:child_process');
const W = require('./world.js');

const here = __dirname;
const root = path.resolve(here, '../..');

function parseArgs(argv) {
  const o = { build: path.join(root, 'build'), minutes: 3, nodes: 1000, hz: 19, cpus: 16, window: 10, replicas: 2,
    simProcs: 4, faults: '', podsPerNode: 4, podLifetime: 300, deployEvery: 900, restartEvery: 1800,
    stackChurn: 0.02, procChurn: 0.01, json: '', limitMib: 512, check: 0, scale: 1, balancer: 'haproxy',
    keep: 0, storesMib: 32, locationsMib: 0, executablesKib: 128, cpu: -1, othersCpu: -1, spillCpu: -1, queueMib: 256,
    kernelSymbols: 256, kernelBuilds: 3, kernelPerBoot: 0, symbolsMib: 0, heaptrack: '', batchRecords: 8192 };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(k in o)) throw new Error(`unknown option ${argv[i]}`);
    const v = argv[++i];
    o[k] = typeof o[k] === 'number' ? Number(v) : v;
  }
  return o;
}
const opt = parseArgs(process.argv);
// --others-cpu: this process, and so every child but the replicas (simulators, sink, API server, HAProxy), on
// that CPU, so that a replica pinned by --cpu has its core to itself.
if (opt.othersCpu >= 0) execFileSync('taskset', ['-a', '-p', '-c', String(opt.othersCpu), String(process.pid)], { stdio: 'ignore' });
// --spill-cpu N (with --others-cpu): the simulators may also run on CPU N (the replica's), but only in the time
// it leaves idle there: they run as SCHED_IDLE, which any other task preempts at once and outweighs 1024 to 3
// (sched(7)). At 2,000 nodes the hour's simulators outgrow one core (100 % busy from minute 21, with the replica
// at half its core), so without this the rig, not the replica, decides the hour. The replica still pays for the
// caches they share with it.
if (opt.spillCpu >= 0 && opt.othersCpu < 0) throw new Error('--spill-cpu needs --others-cpu');
function spill(pid) {
  if (opt.spillCpu < 0) return;
  execFileSync('taskset', ['-a', '-p', '-c', `${opt.othersCpu},${opt.spillCpu}`, String(pid)], { stdio: 'ignore' });
  execFileSync('chrt', ['--idle', '-a', '-p', '0', String(pid)], { stdio: 'ignore' });
}
const log = (...a) => console.log(`[${new Date().toISOString().slice(11, 19)}]`, ...a);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const OUTCOMES = ['named', 'fallback', 'unsymbolized']; // stackrelay_gateway_symbolize_locations_total

// The fault schedule: name → [start, length] in seconds, as fractions of the run for --minutes < 60
// (the CI version), else at fixed minutes of a long soak: all in its first half, so that the second half shows
// the replicas back on their plateau (what a fault holds in memory, such as the backlog while the backend and
// the disk are both down, must be gone by then). --scale stretches lengths.
function schedule(total) {
  const want = opt.faults ? opt.faults.split(',') : [];
  const long = total >= 3600;
  const at = (frac, min) => (long ? min * 60 : frac * total);
  const len = (s, short) => (long ? s : short) * opt.scale;
  const all = {
    kill: { start: at(0.25, 5), length: len(5, 5) },            // SIGKILL replica 0, restart after `length`
    '503': { start: at(0.45, 10), length: len(120, 20) },      // backend 503 + Retry-After
    '500': { start: at(0.6, 15), length: len(60, 10) },        // backend 500
    kube: { start: at(0.35, 20), length: len(60, 15) },        // API server down, then 410 Gone
    disk: { start: at(0.7, 25), length: len(60, 15) },         // disk queue's filesystem full (with the backend down)
  };
  return want.map((w) => {
    if (!all[w]) throw new Error(`unknown fault ${w} (kill, 503, 500, kube, disk)`);
    return { name: w, ...all[w] };
  });
}

// Ports below the kernel's ephemeral range (tests/integration/ports.js says why).
const { freePort } = require('../../tests/integration/ports.js');

function get(port, p) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, timeout: 5000 }, (res) => {
      let b = '';
      res.on('data', (d) => { b += d; });
      res.on('end', () => resolve({ status: res.statusCode, body: b }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
}
function postq(port, p) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, method: 'POST' }, (res) => { res.resume(); res.on('end', resolve); });
    req.on('error', reject);
    req.end();
  });
}

function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const lm of (m[3] || '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]] = lm[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}
const sum = (ms, name, want = {}) => ms.filter((s) => s.name === name && Object.entries(want).every(([k, v]) => s.labels[k] === v))
  .reduce((a, s) => a + s.value, 0);

// Quantiles (ms) of a Prometheus histogram's cumulative buckets [{le (s), n}], as histogram_quantile() makes them:
// linear within the bucket; past the last finite bound, that bound. Returns [q...] with .n the count.
function histogramQuantiles(buckets, qs) {
  const b = [...buckets].sort((x, y) => x.le - y.le);
  const total = b.length ? b[b.length - 1].n : 0;
  const out = qs.map((q) => {
    if (!total) return 0;
    const rank = q * total;
    let prevLe = 0, prevN = 0;
    for (const x of b) {
      if (x.n >= rank) {
        if (x.le === Infinity) return prevLe * 1000;
        return (prevLe + (x.le - prevLe) * (x.n > prevN ? (rank - prevN) / (x.n - prevN) : 1)) * 1000;
      }
      prevLe = x.le; prevN = x.n;
    }
    return prevLe * 1000;
  });
  out.n = total;
  return out;
}

function rssOf(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch (e) { return 0; }
}
function cpuOf(pid) {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // clock ticks (USER_HZ is 100 on Linux)
  } catch (e) { return 0; }
}

// A child's CPU seconds, and once it has exited the last read: a simulator that finished its flush before the
// last row of the run must not take its time out of the rig's (it did, and the rig's cores read 0.51 for 0.82).
function cpuKept(p) {
  const c = cpuOf(p.pid);
  if (c > (p.lastCpu || 0)) p.lastCpu = c;
  return p.lastCpu || 0;
}

const replicasAll = [];
const LIMITS = { dedupeEntries: 2048, dedupePerAgent: 4, maxPods: 0, symbolCacheMib: 16 };

function gatewayYaml(r, ports, dirs) {
  const st = opt.storesMib;
  // The stacks store holds the stacks with their locations and shared lines (the CI soak's 64 MiB, for 200 nodes,
  // is below the sim's working set: it must evict); the locations store only the locations no stored stack holds.
  // Executables: those stored locations name are held, charged to the stacks store, and never evicted; this bound
  // is for the others (--executables-kib, 128: old versions no stored stack uses any more, evicted as images roll
  // out; before 2026-11-29 it held every executable, and 128 evicted live ones, which cost copies of all their
  // locations and a storm of resends). Kernel spaces (five a kernel build, or one a node with --kernel-per-boot)
  // are not judged. Functions (interpreted and JIT frames):
  // the simulators send none, so 1 MiB, not the default 64 MiB, which the memory_limiter would count against
  // its soft limit when it checks that the stores fit.
  // Locations no stored stack holds are what evicted stacks leave behind: that store fills slowly, only as the
  // stacks store evicts (--locations-mib: smaller for an hour's soak, so that it is full before the half judged).
  const locations = opt.locationsMib || Math.max(4, st / 2);
  const stores = `{executables: ${opt.executablesKib}KiB, kernels: 1MiB, functions: 1MiB, locations: ${locations}MiB, ` +
    `stacks: ${2 * st}MiB}`;
  return `
receivers:
  agent:
    endpoint: 127.0.0.1:${ports.replicas[r]}
    stores: ${stores}
    dedupe: {max_entries: ${LIMITS.dedupeEntries}, max_per_agent: ${LIMITS.dedupePerAgent}}
processors:
  memory_limiter: {check_interval: 1s, limit_mib: ${opt.limitMib}}
  k8s_attributes:
    auth_type: kubeConfig
    kube_config_path: ${dirs.kubeconfig}
    cache: {max_pods: ${LIMITS.maxPods}}
    extract: {metadata: [k8s.namespace.name, k8s.pod.name, k8s.pod.uid, k8s.container.name, service.name]}
  symbolize: {debug_dirs: [], debuginfod_urls: [], cache_dir: ${dirs.symbols[r]}, memory_cache_size: ${LIMITS.symbolCacheMib}MiB,
    wait_for_symbols: 2s}
  batch: {timeout: 1s, send_batch_size: ${opt.batchRecords}, send_batch_max_size: ${2 * opt.batchRecords}}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:${ports.sink}
    retry_on_failure: {enabled: true, initial_interval: 1s, max_interval: 10s, max_elapsed_time: 10m}
    sending_queue: {queue_size_mib: ${opt.queueMib}, storage: ${dirs.queue[r]}}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [memory_limiter, k8s_attributes, symbolize, batch], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:${ports.metrics[r]}}}
  shutdown_timeout: 10s
`;
}

class Replica {
  constructor(r, ports, dirs) { this.r = r; this.ports = ports; this.dirs = dirs; this.instances = []; this.proc = null; }

  start() {
    const cfg = path.join(this.dirs.base, `gateway-${this.r}.yaml`);
    fs.writeFileSync(cfg, gatewayYaml(this.r, this.ports, this.dirs));
    const logFile = path.join(this.dirs.base, `gateway-${this.r}-${this.instances.length}.log`);
    const out = fs.openSync(logFile, 'w');
    const bin = path.join(opt.build, 'gateway/stackrelay-gateway');
    // --cpu N: the replica and all its threads on that one CPU (taskset execs the gateway: same PID).
    // --heaptrack FILE: replica 0's first instance under heaptrack (bench/fleet/heap-owners.py reads FILE.zst);
    // heaptrack runs the gateway as its child, so this replica's RSS and CPU figures are heaptrack's, not read.
    let argv = [bin, '--config', cfg];
    const wrapped = opt.heaptrack && this.r === 0 && !this.instances.length;
    if (wrapped) argv = ['heaptrack', '-o', opt.heaptrack, ...argv];
    if (opt.cpu >= 0) argv = ['taskset', '-c', String(opt.cpu), ...argv];
    // Under heaptrack, a session of its own: signal() finds the gateway in it.
    const proc = spawnChild(argv[0], argv.slice(1), { stdio: ['ignore', out, out], detached: !!wrapped });
    fs.closeSync(out);
    const inst = { pid: proc.pid, proc, logFile, last: null, killed: false, exited: null, started: Date.now(), wrapped, bin };
    proc.on('exit', (code, sig) => { inst.exited = code ?? sig; });
    this.instances.push(inst);
    this.proc = proc;
    this.cur = inst;
    return waitUntil(async () => {
      if (inst.exited !== null) throw new Error(`gateway ${this.r} exited ${inst.exited}:\n${fs.readFileSync(logFile, 'utf8').slice(-3000)}`);
      try { return (await get(this.ports.metrics[this.r], '/metrics')).status === 200; } catch (e) { return false; }
    }, 20000, `gateway ${this.r} up`);
  }

  // Sends sig to the gateway of inst: under heaptrack, to the gateway heaptrack runs (heaptrack itself then
  // finishes its recording and exits); SIGKILL goes to the whole session.
  static signal(inst, sig) {
    if (!inst.wrapped) return inst.proc.kill(sig);
    if (sig === 'SIGKILL') return process.kill(-inst.pid, sig);
    let pids = [];
    try {
      const re = `^${inst.bin.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} `;
      pids = execFileSync('pgrep', ['-s', String(inst.pid), '-f', re]).toString().split(/\s+/).filter(Boolean);
    } catch (e) { /* none left */ }
    for (const p of pids) try { process.kill(Number(p), sig); } catch (e) { /* gone */ }
  }

  async scrape() {
    const inst = this.cur;
    if (!inst || inst.exited !== null) return null;
    try {
      const r = await get(this.ports.metrics[this.r], '/metrics');
      inst.prev = inst.last;
      inst.prevAt = inst.lastAt;
      inst.last = parseMetrics(r.body);
      inst.lastAt = Date.now();
      return inst.last;
    } catch (e) { return null; }
  }
}

// Starts a child that dies with the soak even when the soak is SIGKILLed (its exit handler then never runs):
// under setpriv --pdeathsig KILL (util-linux), which execs the command (same PID) with that parent-death signal.
function spawnChild(cmd, args, options) {
  return spawn('setpriv', ['--pdeathsig', 'KILL', '--', cmd, ...args], options);
}

async function waitUntil(fn, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await sleep(100);
  }
  throw new Error(`timed out: ${what}`);
}

function startChild(cmd, args, name, dirs, onLine) {
  const p = spawnChild(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const errFile = fs.createWriteStream(path.join(dirs.base, `${name}.err`));
  p.stderr.pipe(errFile);
  const rl = readline.createInterface({ input: p.stdout });
  rl.on('line', (l) => onLine && onLine(l));
  return p;
}

function pct(a, q) {
  if (!a.length) return 0;
  const s = Float64Array.from(a).sort();
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

async function main() {
  const total = opt.minutes * 60;
  const faults = schedule(total);
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-fleet-'));
  const dirs = { base, queue: [], symbols: [], kubeconfig: path.join(base, 'kubeconfig') };
  const children = [];
  const mounts = [];
  const cleanup = () => {
    for (const c of children) try { c.kill('SIGKILL'); } catch (e) { /* gone */ }
    for (const r of replicasAll) for (const i of r.instances) if (i.exited === null) try { Replica.signal(i, 'SIGKILL'); } catch (e) { /* gone */ }
    for (const m of mounts) try { execFileSync('umount', ['-l', m]); } catch (e) { /* not mounted */ }
    if (!opt.keep) fs.rmSync(base, { recursive: true, force: true });
  };
  process.on('exit', cleanup);
  process.on('SIGINT', () => process.exit(130));
  process.on('SIGTERM', () => process.exit(143));

  const wantDisk = faults.some((f) => f.name === 'disk');
  for (let r = 0; r < opt.replicas; r++) {
    const q = path.join(base, `queue-${r}`);
    fs.mkdirSync(q);
    if (wantDisk) {
      if (process.getuid() !== 0) throw new Error('the disk fault mounts a tmpfs: run as root');
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${opt.queueMib}m`, 'tmpfs', q]);
      mounts.push(q);
    }
    dirs.queue.push(q);
    const sym = path.join(base, `symbols-${r}`);
    fs.mkdirSync(sym);
    dirs.symbols.push(sym);
  }
  // Uploaded symbol tables: one per image version and per kernel space (about 15 MiB at 1,000 nodes after an
  // hour, when every node's kernel was its own); at most 8 MiB, so that the cache evicts at any fleet size
  // (evicted tables reload from cache_dir).
  // --symbols-mib sets it (the gateway's default is 256 MiB).
  LIMITS.symbolCacheMib = opt.symbolsMib || Math.max(1, Math.min(8, opt.storesMib >> 4));
  LIMITS.maxPods = Math.max(64, Math.round(opt.nodes * opt.podsPerNode * 1.1));
  // Responses remembered for resends: 2,048, or 8 a node, so that an agent's resend after its 10 s timeout still
  // finds its first answer (at 2,000 nodes a window of 2,048 held about one request a node, and every timed-out
  // request that the replica had taken was delivered twice). Each agent instance keeps its latest 4 (the gateway's
  // default is 16; an agent resends only its one outstanding request), so that a 3-minute run evicts by that bound
  // as well as by the window's.
  LIMITS.dedupeEntries = Math.max(2048, 8 * opt.nodes);

  // Sink.
  const ports = { sink: 0, replicas: [], metrics: [], lb: await freePort() };
  const sinkProc = startChild(process.execPath, [path.join(here, 'sink.js')], 'sink', dirs);
  // The sink stands for a backend on its own machines: ahead of the simulators for the CPU (as root), so that a
  // load storm does not starve it into answering nothing in time (its requests time out, are sent again, and
  // it decodes bodies nobody waits for).
  try { os.setPriority(sinkProc.pid, -5); } catch (e) { /* not root: as it is */ }
  children.push(sinkProc);
  ports.sink = await new Promise((res) => readline.createInterface({ input: sinkProc.stdout }).once('line', (l) => res(Number(l.split(' ')[1]))));

  // Fake Kubernetes API server with every node's pods of the current generation.
  const epoch = Date.now();
  const gens = new Map();
  const state = { namespaces: [{ metadata: { name: 'kube-system', uid: 'cluster-fleet' } }], pods: [] };
  for (let t = 0; t < 8; t++) state.namespaces.push({ metadata: { name: `team${t}`, uid: `ns-team${t}` } });
  for (let n = 0; n < opt.nodes; n++)
    for (let s = 0; s < opt.podsPerNode; s++) {
      const g = W.podGeneration(n, s, epoch, epoch, opt.podLifetime * 1000);
      gens.set(n * 1000 + s, g);
      state.pods.push(W.podObject(n, s, g, 200));
    }
  fs.writeFileSync(path.join(base, 'state.json'), JSON.stringify(state));
  fs.writeFileSync(path.join(base, 'accepted-token'), 'fleet-token\n');
  fs.writeFileSync(path.join(base, 'token'), 'fleet-token\n');
  const kube = spawnChild(process.execPath, [path.join(root, 'tests/fakes/fake-kube-apiserver.js'), '--dir', base, '--state',
    path.join(base, 'state.json')], { stdio: ['pipe', 'pipe', 'ignore'] });
  children.push(kube);
  const kubePort = await new Promise((res) => readline.createInterface({ input: kube.stdout })
    .on('line', (l) => { const m = /^ready (\d+)/.exec(l); if (m) res(Number(m[1])); }));
  fs.writeFileSync(dirs.kubeconfig, `apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: f\n  cluster:\n` +
    `    server: https://127.0.0.1:${kubePort}\n    certificate-authority: ${base}/ca.crt\ncontexts:\n- name: t\n` +
    `  context: {cluster: f, user: u}\nusers:\n- name: u\n  user:\n    tokenFile: ${base}/token\n`);
  const kubeCmd = (o) => kube.stdin.write(JSON.stringify(o) + '\n');
  let podChanges = 0;
  const churnPods = () => {
    const now = Date.now();
    for (let n = 0; n < opt.nodes; n++)
      for (let s = 0; s < opt.podsPerNode; s++) {
        const g = W.podGeneration(n, s, now, epoch, opt.podLifetime * 1000), old = gens.get(n * 1000 + s);
        if (g === old) continue;
        kubeCmd({ op: 'delete', resource: 'pods', object: W.podObject(n, s, old, 200) });
        kubeCmd({ op: 'add', resource: 'pods', object: W.podObject(n, s, g, 200) });
        gens.set(n * 1000 + s, g);
        podChanges++;
      }
  };

  // Replicas and the balancer.
  const replicas = [];
  for (let r = 0; r < opt.replicas; r++) {
    ports.replicas.push(await freePort());
    ports.metrics.push(await freePort());
    replicas.push(new Replica(r, ports, dirs));
    replicasAll.push(replicas[r]);
  }
  await Promise.all(replicas.map((r) => r.start()));
  const lbCfg = path.join(base, 'haproxy.cfg');
  fs.writeFileSync(lbCfg, `global\n  maxconn 9000\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 15m\n` +
    `  timeout server 15m\nfrontend agents\n  bind 127.0.0.1:${ports.lb}\n  default_backend gateways\n` +
    `backend gateways\n  balance roundrobin\n` +
    replicas.map((r, i) => `  server r${i} 127.0.0.1:${ports.replicas[i]} check inter 1s fall 2 rise 2\n`).join(''));
  const lb = spawnChild('haproxy', ['-db', '-f', lbCfg], { stdio: ['ignore', 'ignore', fs.openSync(path.join(base, 'haproxy.log'), 'w')] });
  children.push(lb);
  // HAProxy exits at once when it cannot bind: fail then, naming its log, rather than soak with no balancer.
  let lbExit = null;
  lb.on('exit', (code, sig) => { lbExit = `haproxy exited (${sig || code}); see ${path.join(base, 'haproxy.log')}`; });
  await waitUntil(() => {
    if (lbExit) throw new Error(lbExit);
    return new Promise((res) => { const s = net.connect(ports.lb, '127.0.0.1', () => { s.destroy(); res(true); }); s.on('error', () => res(false)); });
  }, 10000, 'haproxy up');
  await new Promise((r) => setTimeout(r, 200));
  if (lbExit) throw new Error(lbExit);
  log(`${opt.replicas} replicas behind haproxy 127.0.0.1:${ports.lb}; sink ${ports.sink}; kube ${kubePort}; dir ${base}`);

  // Simulators.
  const sims = [];
  const clock = { t0: 0 };
  const per = Math.ceil(opt.nodes / opt.simProcs);
  for (let k = 0; k < opt.simProcs && k * per < opt.nodes; k++) {
    const n = Math.min(per, opt.nodes - k * per);
    const s = { last: null, final: null, lat: [], latLate: [] };
    s.proc = startChild(process.execPath, [path.join(here, 'sim.js'), '--target', `127.0.0.1:${ports.lb}`, '--nodes', String(n),
      '--first-node', String(k * per), '--hz', String(opt.hz), '--cpus', String(opt.cpus), '--window', String(opt.window),
      '--duration', String(total), '--pods-per-node', String(opt.podsPerNode), '--pod-lifetime', String(opt.podLifetime),
      '--epoch', String(epoch), '--deploy-every', String(opt.deployEvery), '--restart-every', String(opt.restartEvery),
      '--stack-churn', String(opt.stackChurn), '--proc-churn', String(opt.procChurn), '--seed', String(k + 1),
      '--kernel-symbols', String(opt.kernelSymbols), '--kernel-builds', String(opt.kernelBuilds),
      '--kernel-per-boot', String(opt.kernelPerBoot),
      '--flush-timeout', '90'], `sim-${k}`, dirs, (l) => {
      const m = /^(stats|final) (.*)$/.exec(l);
      if (!m) return;
      const j = JSON.parse(m[2]);
      for (const x of j.latencies) s.lat.push(x);
      // The last half, as for the cores: past the start-up burst of definitions.
      if (clock.t0 && (Date.now() - clock.t0) / 1000 >= total / 2) for (const x of j.latencies) s.latLate.push(x);
      j.latencies = undefined;
      if (m[1] === 'final') s.final = j; else s.last = j;
    });
    spill(s.proc.pid);
    children.push(s.proc);
    sims.push(s);
  }

  // The clock (fault schedule, RSS series) starts when every simulator has built its nodes and reported once.
  await waitUntil(() => sims.every((s) => s.last || s.final), 600000, 'simulators started');
  log('simulators running');
  // Monitoring: RSS, CPU and metrics of every replica; pod churn; faults.
  const series = [];
  const t0 = Date.now();
  clock.t0 = t0;
  const events = [];
  const pending = faults.map((f) => ({ ...f, state: 'waiting' }));
  let monitoring = true;
  const monitor = (async () => {
    while (monitoring) {
      const t = (Date.now() - t0) / 1000;
      churnPods();
      const row = { t, replicas: [] };
      for (const r of replicas) {
        const ms = await r.scrape();
        const pid = r.cur && r.cur.exited === null ? r.cur.pid : 0;
        const rr = { r: r.r, rss: pid ? rssOf(pid) : 0, cpu: pid ? cpuOf(pid) : 0 };
        if (ms) {
          rr.stores = {};
          for (const kind of ['executables', 'kernels', 'locations', 'stacks'])
            rr.stores[kind] = { bytes: sum(ms, 'stackrelay_gateway_store_bytes', { store: kind }),
              limit: sum(ms, 'stackrelay_gateway_store_limit_bytes', { store: kind }),
              evictions: sum(ms, 'stackrelay_gateway_store_evictions_total', { store: kind }) };
          rr.stores.symbols = { bytes: sum(ms, 'stackrelay_gateway_symbolize_cache_bytes'),
            limit: LIMITS.symbolCacheMib * 1048576, evictions: sum(ms, 'stackrelay_gateway_symbolize_cache_evictions_total') };
          rr.stores.pods = { bytes: sum(ms, 'stackrelay_gateway_k8s_pods'), limit: LIMITS.maxPods,
            evictions: sum(ms, 'stackrelay_gateway_k8s_pods_evicted_total') + sum(ms, 'stackrelay_gateway_k8s_pods_refused_total'),
            deleted: sum(ms, 'stackrelay_gateway_k8s_pods_deleted') };
          rr.stores.dedupe = { bytes: sum(ms, 'stackrelay_gateway_agent_dedupe_entries'), limit: LIMITS.dedupeEntries,
            evictions: sum(ms, 'stackrelay_gateway_agent_dedupe_evictions_total') };
          rr.accepted = sum(ms, 'stackrelay_gateway_samples_accepted_total', { component: 'agent' });
          rr.exported = sum(ms, 'stackrelay_gateway_samples_exported_total');
          rr.queue = sum(ms, 'stackrelay_gateway_export_queue_samples');
          rr.memState = sum(ms, 'stackrelay_gateway_memory_limiter_state');
          rr.heapInUse = sum(ms, 'stackrelay_gateway_heap_bytes', { state: 'in_use' });
          rr.heapFree = sum(ms, 'stackrelay_gateway_heap_bytes', { state: 'free' });
          rr.symbolize = {};
          for (const o of OUTCOMES) rr.symbolize[o] = sum(ms, 'stackrelay_gateway_symbolize_locations_total', { outcome: o });
          // The gateway's own time per request (first header to answer), cumulative buckets by bound.
          rr.duration = ms.filter((s) => s.name === 'stackrelay_gateway_agent_request_duration_seconds_bucket')
            .map((s) => ({ le: s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), n: s.value }));
        }
        row.replicas.push(rr);
      }
      const ss = await get(ports.sink, '/stats').then((x) => JSON.parse(x.body)).catch(() => null);
      row.sink = ss ? ss.samples : null;
      row.taken = sims.reduce((a, s) => a + (s.last ? s.last.taken : 0), 0);
      // The rig's own CPU (simulators and sink): near a whole core, its latency is the rig's, not the replica's.
      row.rigCpu = sims.reduce((a, s) => a + cpuKept(s.proc), 0) + cpuKept(sinkProc);
      series.push(row);
      for (const f of pending) {
        if (f.state === 'waiting' && t >= f.start) { f.state = 'on'; await faultOn(f); }
        else if (f.state === 'on' && t >= f.start + f.length) { f.state = 'done'; await faultOff(f); }
      }
      if (series.length % 15 === 0) {
        const rs = row.replicas.map((x) => `r${x.r} ${(x.rss / 1048576).toFixed(0)}MiB`).join(' ');
        log(`t=${t.toFixed(0)}s taken=${row.taken} delivered=${row.sink} ${rs} pods changed=${podChanges}`);
      }
      await sleep(2000);
    }
  })();

  async function faultOn(f) {
    events.push({ t: (Date.now() - t0) / 1000, fault: f.name, on: true });
    log(`fault ${f.name} on for ${f.length}s`);
    if (f.name === 'kill') {
      const r = replicas[0];
      const t0s = Date.now();
      await r.scrape(); // what it holds at the moment of the kill
      r.cur.killed = true;
      Replica.signal(r.cur, 'SIGKILL');
      // It went on accepting between the scrape's snapshot and the kill: a request being decoded at the snapshot
      // (not counted yet) may be answered before the kill, and new ones at its rate over the scrape before, for as
      // long as this one took. A bound, added to what the scrape says it held: its rate times that time, plus one
      // request (one node's window at most).
      const inst = r.cur, agentAcc = (ms) => sum(ms || [], 'stackrelay_gateway_samples_accepted_total', { component: 'agent' });
      const rate = inst.prev && inst.lastAt > inst.prevAt ? Math.max(0, agentAcc(inst.last) - agentAcc(inst.prev)) /
        (inst.lastAt - inst.prevAt) : 0;
      inst.acceptedAfterScrape = Math.ceil(rate * (Date.now() - t0s)) + opt.hz * opt.cpus * opt.window;
    } else if (f.name === '503') await postq(ports.sink, `/fault?status=503&retry_after=5&seconds=${f.length}`);
    else if (f.name === '500') await postq(ports.sink, `/fault?status=500&seconds=${f.length}`);
    else if (f.name === 'kube') kubeCmd({ op: 'down', seconds: f.length, then410: true });
    else if (f.name === 'disk') {
      // The backend is down too, so the queue has to hold what arrives; the ballast leaves ~1 MiB.
      await postq(ports.sink, `/fault?status=503&retry_after=5&seconds=${f.length}`);
      for (const q of dirs.queue) {
        const free = fs.statfsSync(q).bavail * fs.statfsSync(q).bsize;
        try { execFileSync('fallocate', ['-l', String(Math.max(0, free - 1048576)), path.join(q, 'ballast')]); } catch (e) { log(`ballast: ${e.message}`); }
      }
    }
  }
  async function faultOff(f) {
    events.push({ t: (Date.now() - t0) / 1000, fault: f.name, on: false });
    log(`fault ${f.name} off`);
    if (f.name === 'kill') await replicas[0].start();
    else if (f.name === 'disk') for (const q of dirs.queue) fs.rmSync(path.join(q, 'ballast'), { force: true });
  }

  // Wait for the simulators' final reports (they stop at --minutes and flush).
  await waitUntil(() => sims.every((s) => s.final), (total + 150) * 1000, 'simulators finished');
  // Drain: every replica's queue empty and the sink not moving for 5 s.
  let lastSink = -1, still = 0;
  await waitUntil(async () => {
    const ss = JSON.parse((await get(ports.sink, '/stats')).body);
    let q = 0;
    for (const r of replicas) { const ms = await r.scrape(); if (ms) q += sum(ms, 'stackrelay_gateway_export_queue_samples') + sum(ms, 'stackrelay_gateway_samples_held'); }
    still = ss.samples === lastSink && q === 0 ? still + 1 : 0;
    lastSink = ss.samples;
    await sleep(1000);
    return still >= 5;
  }, 300000, 'gateways drained');
  monitoring = false;
  await monitor;
  for (const r of replicas) await r.scrape();
  const sinkStats = JSON.parse((await get(ports.sink, '/stats')).body);
  for (const r of replicas) Replica.signal(r.cur, 'SIGTERM');
  await sleep(1000);
  // heaptrack writes the rest of its recording once the gateway is gone.
  for (const r of replicas) if (r.cur.wrapped) await waitUntil(async () => r.cur.exited !== null, 120000, 'heaptrack done').catch(() => 0);

  report({ series, sims, replicas, sinkStats, events, podChanges, faults, total, base });
  process.exit(process.exitCode ?? 0); // the 'exit' handler stops every child
}

function report(x) {
  const { series, sims, replicas, sinkStats } = x;
  const agent = { taken: 0, accepted: 0, buffered: 0, acceptedAfterUnknown: 0, flushInDoubt: 0, dropped: { buffer_full: 0, rejected: 0, flush_timeout: 0 },
    requests: 0, retries: 0, transportErrors: 0, missingRounds: 0, resentMissing: 0, acceptedMismatch: 0, uploads: 0, reuploads: 0, restarts: 0, connections: 0, statuses: {} };
  const lat = [], latLate = [];
  for (const s of sims) {
    const f = s.final;
    for (const k of ['taken', 'accepted', 'buffered', 'acceptedAfterUnknown', 'flushInDoubt', 'requests', 'retries', 'transportErrors', 'missingRounds', 'resentMissing', 'acceptedMismatch', 'uploads', 'reuploads', 'restarts', 'connections'])
      agent[k] += f[k] || 0;
    for (const k of Object.keys(agent.dropped)) agent.dropped[k] += f.dropped[k];
    for (const [k, v] of Object.entries(f.statuses)) agent.statuses[k] = (agent.statuses[k] || 0) + v;
    for (const l of s.lat) lat.push(l);
    for (const l of s.latLate) latLate.push(l);
  }
  // Gateway drops by component and reason, over every instance (a killed one: its last scrape).
  const gwDrops = {};
  let dupSamples = 0, acceptedGw = 0, exportedGw = 0, lostKilled = 0;
  const instances = [];
  for (const r of replicas)
    for (const inst of r.instances) {
      const ms = inst.last || [];
      for (const s of ms.filter((m) => m.name === 'stackrelay_gateway_samples_dropped_total' && m.value)) {
        const k = `${s.labels.component}/${s.labels.reason}`;
        gwDrops[k] = (gwDrops[k] || 0) + s.value;
      }
      dupSamples += sum(ms, 'stackrelay_gateway_agent_duplicate_samples_total');
      const acc = sum(ms, 'stackrelay_gateway_samples_accepted_total', { component: 'agent' });
      const exp = sum(ms, 'stackrelay_gateway_samples_exported_total');
      acceptedGw += acc;
      exportedGw += exp;
      instances.push({ replica: r.r, pid: inst.pid, killed: inst.killed, accepted: acc, exported: exp });
      // Accepted, neither exported nor dropped, and not in the disk queue (which the restart replays).
      if (inst.killed) lostKilled += acc - exp - sum(ms, 'stackrelay_gateway_samples_dropped_total') -
        sum(ms, 'stackrelay_gateway_export_queue_samples') + (inst.acceptedAfterScrape || 0);
    }
  const gwDropTotal = Object.values(gwDrops).reduce((a, v) => a + v, 0);
  const agentDropTotal = Object.values(agent.dropped).reduce((a, v) => a + v, 0);
  const delivered = sinkStats.samples;
  const unexplained = agent.taken - delivered - agentDropTotal - gwDropTotal - agent.buffered;
  // RSS: peak per replica; plateau: the last half's peak against the peak at the middle (a 10 % window).
  const rss = replicas.map((r) => {
    const pts = series.map((row) => ({ t: row.t, v: row.replicas[r.r].rss })).filter((p) => p.v);
    const T = series.length ? series[series.length - 1].t : 0;
    const peak = Math.max(0, ...pts.map((p) => p.v));
    // The last half in two quarters: the peak of the last quarter against the peak of the third.
    const mid = Math.max(0, ...pts.filter((p) => p.t >= T * 0.5 && p.t < T * 0.75).map((p) => p.v));
    const lastHalf = Math.max(0, ...pts.filter((p) => p.t > T * 0.5).map((p) => p.v));
    const end = Math.max(0, ...pts.filter((p) => p.t >= T * 0.75).map((p) => p.v));
    return { replica: r.r, peak, mid, lastHalf, end, growth: mid ? end / mid - 1 : 0 };
  });
  const stores = {};
  for (const row of series)
    for (const rr of row.replicas)
      for (const [k, v] of Object.entries(rr.stores || {})) {
        const s = stores[k] ??= { maxBytes: 0, limit: v.limit, evictions: 0, over: 0 };
        s.maxBytes = Math.max(s.maxBytes, v.bytes);
        s.limit = v.limit;
        if (v.bytes > v.limit) s.over++;
      }
  for (const r of replicas) for (const inst of r.instances) for (const k of Object.keys(stores)) {
    const ms = inst.last || [];
    if (k === 'symbols') stores[k].evictions += sum(ms, 'stackrelay_gateway_symbolize_cache_evictions_total');
    else if (k === 'pods') stores[k].evictions += sum(ms, 'stackrelay_gateway_k8s_pods_evicted_total');
    else if (k === 'dedupe') stores[k].evictions += sum(ms, 'stackrelay_gateway_agent_dedupe_evictions_total');
    else stores[k].evictions += sum(ms, 'stackrelay_gateway_store_evictions_total', { store: k });
  }
  const secs = x.total;
  const cpu = replicas.map((r) => {
    const pts = series.map((row) => row.replicas[r.r].cpu).filter((v) => v);
    return pts.length ? pts[pts.length - 1] : 0;
  });
  // Steady state: cores used over the last half, after the start-up burst of definitions (every node
  // defines all its stacks in its first window). Only a replica whose one instance ran all along is judged.
  const cpuLastHalf = replicas.map((r) => {
    const pts = series.filter((row) => row.t >= secs / 2 && row.replicas[r.r].cpu).map((row) => ({ t: row.t, v: row.replicas[r.r].cpu }));
    if (pts.length < 2 || r.instances.length !== 1) return null;
    const a = pts[0], b = pts[pts.length - 1];
    return b.t > a.t ? (b.v - a.v) / (b.t - a.t) : null;
  });
  // Over the second half of the run, before the agents' flush: what reached the sink against what the nodes took
  // (below 1 the agents' backlog grows: the fleet is not held, whatever the flush delivers later), and the rig's cores.
  const half = series.filter((row) => row.t >= secs / 2 && row.t <= secs && row.sink !== null);
  const ha = half[0], hb = half[half.length - 1];
  const intakeLastHalf = ha && hb && hb.taken > ha.taken ? (hb.sink - ha.sink) / (hb.taken - ha.taken) : null;
  const rigCoresLastHalf = ha && hb && hb.t > ha.t ? (hb.rigCpu - ha.rigCpu) / (hb.t - ha.t) : null;
  // The gateway's own request time over the second half, from its histogram (one instance ran all along): the
  // agents' latency beside it includes the simulators' event loops, which a saturated rig delays.
  const gwLatLastHalf = replicas.map((r) => {
    const pts = series.filter((row) => row.t >= secs / 2 && row.t <= secs && row.replicas[r.r].duration &&
      row.replicas[r.r].duration.length).map((row) => row.replicas[r.r].duration);
    if (pts.length < 2 || r.instances.length !== 1) return null;
    const a = pts[0], b = pts[pts.length - 1];
    return histogramQuantiles(b.map((x, i) => ({ le: x.le, n: x.n - (a[i] ? a[i].n : 0) })), [0.5, 0.9, 0.99]);
  });
  const out = {
    load: { nodes: opt.nodes, hz: opt.hz, cpus: opt.cpus, minutes: opt.minutes, replicas: opt.replicas,
      samplesPerSecond: opt.nodes * opt.hz * opt.cpus },
    faults: x.events, agent, delivered, sink: { requests: sinkStats.requests, statuses: sinkStats.statuses,
      redelivered: sinkStats.redelivered, redeliveredSamples: sinkStats.redeliveredSamples },
    gateway: { accepted: acceptedGw, exported: exportedGw, drops: gwDrops, duplicateSamplesCaught: dupSamples, instances,
      lostInKilledAtLastScrape: lostKilled },
    conservation: { taken: agent.taken, delivered, ratio: agent.taken ? delivered / agent.taken : 0,
      agentDrops: agent.dropped, gatewayDrops: gwDrops, unexplained },
    latencyMs: { n: lat.length, p50: pct(lat, 0.5), p90: pct(lat, 0.9), p99: pct(lat, 0.99), max: pct(lat, 1) },
    latencyMsLastHalf: { n: latLate.length, p50: pct(latLate, 0.5), p90: pct(latLate, 0.9), p99: pct(latLate, 0.99),
      max: pct(latLate, 1) },
    rss, stores, podChanges: x.podChanges, gatewayCpuSeconds: cpu, gatewayCoresLastHalf: cpuLastHalf,
    intakeLastHalf, rigCoresLastHalf, gatewayRequestMsLastHalf: gwLatLastHalf,
    rate: { takenPerSecond: agent.taken / secs, deliveredPerSecond: delivered / secs },
  };
  const fmt = (n) => (n / 1048576).toFixed(1);
  console.log(`\n== fleet soak: ${opt.nodes} nodes × ${opt.cpus} CPUs × ${opt.hz} Hz, ${opt.replicas} replicas, ${opt.minutes} min, faults: ${opt.faults || 'none'}`);
  console.log(`samples taken ${agent.taken}, delivered ${delivered} (${out.conservation.ratio.toFixed(6)}), ` +
    `${(agent.taken / secs).toFixed(0)}/s in, ${(delivered / secs).toFixed(0)}/s exported; the sink also got ` +
    `${sinkStats.redelivered} export requests again (${sinkStats.redeliveredSamples} samples, not counted as delivered)`);
  console.log(`agent drops ${JSON.stringify(agent.dropped)}; gateway drops ${JSON.stringify(gwDrops)}; still buffered ${agent.buffered}; ` +
    `unexplained ${unexplained}; bounds: the killed replica held ${lostKilled} in memory (accepted, not exported, ` +
    `dropped or queued on disk at its last scrape, plus what it may have accepted while that scrape ran), ${agent.acceptedAfterUnknown} accepted after an attempt without answer (possible ` +
    `duplicates across replicas), ${agent.flushInDoubt} dropped at the flush in doubt`);
  console.log(`requests ${agent.requests} ${JSON.stringify(agent.statuses)}, retries ${agent.retries}, transport errors ${agent.transportErrors}, ` +
    `missing-definition rounds ${agent.missingRounds} (${agent.resentMissing} samples resent, accepted_samples ` +
    `disagreeing ${agent.acceptedMismatch} times), symbol uploads ${agent.uploads} (${agent.reuploads} wanted again), agent restarts ${agent.restarts}, connections ${agent.connections}; ` +
    `duplicates caught ${dupSamples}; pod changes ${x.podChanges}`);
  const latLine = (l) => `p50 ${l.p50.toFixed(1)} p90 ${l.p90.toFixed(1)} p99 ${l.p99.toFixed(1)} max ${l.max.toFixed(1)} (${l.n} requests)`;
  console.log(`latency ms ${latLine(out.latencyMs)}; over the last half ${latLine(out.latencyMsLastHalf)}`);
  console.log(`gateway's own time per request over the last half (first header to answer, its histogram): ` +
    gwLatLastHalf.map((q, i) => `replica ${i} ${q ? `p50 ${q[0].toFixed(0)} p90 ${q[1].toFixed(0)} p99 ${q[2].toFixed(0)} ms (${q.n} requests)` : 'n/a'}`).join('; '));
  console.log(`gateway CPU seconds (current instance of each replica): ${cpu.map((c) => c.toFixed(1)).join(', ')} over ${secs} s; ` +
    `cores used over the last half: ${cpuLastHalf.map((c) => (c === null ? 'n/a (restarted)' : c.toFixed(2))).join(', ')}; ` +
    `simulators and sink: ${rigCoresLastHalf === null ? 'n/a' : rigCoresLastHalf.toFixed(2)} cores`);
  console.log(`intake over the second half (delivered ÷ taken, before the flush): ` +
    `${intakeLastHalf === null ? 'n/a' : intakeLastHalf.toFixed(3)}${intakeLastHalf !== null && intakeLastHalf < 0.98 ? ' (the agents\' backlog grows)' : ''}`);
  for (const r of rss) console.log(`replica ${r.replica} RSS peak ${fmt(r.peak)} MiB (limit ${opt.limitMib}), middle ${fmt(r.mid)}, end ${fmt(r.end)}, growth ${(100 * r.growth).toFixed(1)} %`);
  // What the symbolize processors made of the locations (every instance's last scrape).
  const outcomes = {};
  for (const r of replicas) for (const inst of r.instances) for (const o of OUTCOMES)
    outcomes[o] = (outcomes[o] || 0) + sum(inst.last || [], 'stackrelay_gateway_symbolize_locations_total', { outcome: o });
  out.symbolizeLocations = outcomes;
  // The steady state apart from the start-up (every node's first stacks wait for tables not uploaded yet): the
  // looks of the last half, for replicas whose one instance ran all along.
  const late = Object.fromEntries(OUTCOMES.map((o) => [o, 0]));
  let lateKnown = replicas.length > 0;
  for (const r of replicas) {
    const pts = series.filter((row) => row.t >= secs / 2 && row.replicas[r.r].symbolize).map((row) => row.replicas[r.r].symbolize);
    if (pts.length < 2 || r.instances.length !== 1) { lateKnown = false; continue; }
    for (const o of OUTCOMES) late[o] += pts[pts.length - 1][o] - pts[0][o];
  }
  out.symbolizeLocationsLastHalf = lateKnown ? late : null;
  console.log(`symbolize locations (looks): named ${outcomes.named}, fallback ${outcomes.fallback}, unsymbolized ${outcomes.unsymbolized}; ` +
    `over the last half ${lateKnown ? `named ${late.named}, fallback ${late.fallback}, unsymbolized ${late.unsymbolized}` : 'n/a (restarted)'}`);
  for (const [k, s] of Object.entries(stores))
    console.log(`store ${k}: max ${k === 'pods' || k === 'dedupe' ? s.maxBytes : fmt(s.maxBytes) + ' MiB'} of ${k === 'pods' || k === 'dedupe' ? s.limit : fmt(s.limit) + ' MiB'}, ` +
      `evictions ${s.evictions}, samples over the limit ${s.over}`);
  if (opt.json) fs.writeFileSync(opt.json, JSON.stringify({ ...out, series }, null, 1));

  if (opt.check) {
    const fails = [];
    const hadFaults = x.faults.length > 0;
    for (const r of rss) {
      if (r.peak > opt.limitMib * 1048576) fails.push(`replica ${r.replica} RSS peak ${fmt(r.peak)} MiB over ${opt.limitMib} MiB`);
      // A replica killed and restarted during the run is still warming up at the middle: not judged.
      if (r.growth > 0.05 && replicas[r.replica].instances.length === 1)
        fails.push(`replica ${r.replica} RSS grew ${(100 * r.growth).toFixed(1)} % in the last half`);
    }
    for (const [k, s] of Object.entries(stores)) {
      if (s.over) fails.push(`store ${k} over its limit in ${s.over} samples`);
      if (k !== 'kernels' && !s.evictions) fails.push(`store ${k} never evicted (limit too large for the check?)`);
    }
    if (agent.buffered) fails.push(`${agent.buffered} samples still buffered at the end`);
    if (agent.acceptedMismatch) fails.push(`the gateway's accepted_samples disagreed with the protocol ${agent.acceptedMismatch} times`);
    if (!hadFaults) {
      if (delivered !== agent.taken) fails.push(`delivered ${delivered} ≠ taken ${agent.taken}`);
      if (agentDropTotal || gwDropTotal) fails.push('drops without faults');
    } else if (unexplained > Math.max(0, lostKilled) || unexplained < -(agent.acceptedAfterUnknown + agent.flushInDoubt)) {
      fails.push(`unexplained ${unexplained} samples: outside [-(${agent.acceptedAfterUnknown} accepted after an attempt ` +
        `without answer + ${agent.flushInDoubt} dropped in doubt at the flush), ${lostKilled} held in memory by the killed replica]`);
    }
    if (fails.length) {
      console.log('FAIL:\n  ' + fails.join('\n  '));
      process.exitCode = 1;
      // What the simulators said (mismatched answers, requests still refused after 3 resends).
      for (const f of fs.readdirSync(x.base).filter((n) => /^sim-\d+\.err$/.test(n))) {
        const lines = fs.readFileSync(path.join(x.base, f), 'utf8').split('\n').filter(Boolean);
        if (lines.length) console.log(`${f} (last ${Math.min(lines.length, 20)} of ${lines.length} lines):\n  ` + lines.slice(-20).join('\n  '));
      }
    } else console.log('PASS');
  }
}

main().catch((e) => { console.error(e.stack || e); process.exit(2); });
