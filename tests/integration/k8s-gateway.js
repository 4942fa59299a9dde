#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// The real stackrelay-gateway with k8s_attributes and relabel, between an
// independent agent client (gw-lib.js) and the fake Pyroscope
// (fake_pyroscope.py), reading pods from the fake API server
// (fake-kube-apiserver.js, TLS + bearer token, via a kubeconfig):
//   - a sample from a container of a Deployment's pod gets k8s.pod.name,
//     k8s.namespace.name, k8s.deployment.name, k8s.container.name and
//     service.name = the Deployment's name;
//   - a sample carrying only k8s.pod.uid (no container ID) is matched by UID;
//   - an init container's ID matches;
//   - a host process (no container) gets service.name = its executable name;
//   - a pod added after startup is picked up from the watch;
//   - relabel drops a noisy process (counted) and rewrites an attribute;
//   - samples sent before the first sync are held, then exported labelled
//     (wait_for_metadata), and the accounting adds up;
//   - /metrics shows the cache and API client counters.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const readline = require('node:readline');
const { spawn, execFileSync } = require('node:child_process');
const L = require('./gw-lib.js');

const root = process.env.SR_SOURCE_ROOT || path.resolve(__dirname, '../..');
const CID_WEB = 'a1'.repeat(32);
const CID_INIT = 'b2'.repeat(32);
const CID_LATE = 'c3'.repeat(32);
const POD_UID_DB = '5d1e2c3b-0000-4000-8000-00000000d0b0';

function haveTools() {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    execFileSync('python3', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (e) {
    return false;
  }
}

// Starts fake-kube-apiserver.js; resolves {proc, port, cmd(json)}.
function startKube(dir, state) {
  fs.writeFileSync(path.join(dir, 'state.json'), JSON.stringify(state));
  fs.writeFileSync(path.join(dir, 'accepted-token'), 'sa-token-1\n');
  fs.writeFileSync(path.join(dir, 'token'), 'sa-token-1\n');
  const proc = spawn(process.execPath, [path.join(root, 'tests/fakes/fake-kube-apiserver.js'), '--dir', dir,
    '--state', path.join(dir, 'state.json')], { stdio: ['pipe', 'pipe', 'pipe'] });
  let errlog = '';
  proc.stderr.on('data', (d) => { errlog += d; });
  const rl = readline.createInterface({ input: proc.stdout });
  const waiters = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('fake API server did not start:\n' + errlog)), 15000);
    rl.on('line', (line) => {
      const m = /^ready (\d+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve({
          proc, port: Number(m[1]), log: () => errlog,
          cmd(obj) {
            return new Promise((res) => { waiters.push(res); proc.stdin.write(JSON.stringify(obj) + '\n'); });
          },
        });
      } else if (line.startsWith('ok ') && waiters.length) {
        waiters.shift()();
      }
    });
  });
}

function startPyroscope(dir) {
  const portFile = path.join(dir, 'pyroscope.port');
  const proc = spawn('python3', [path.join(root, 'tests/fakes/fake_pyroscope.py'), '--port-file', portFile,
    '--lifetime', '110'], { stdio: ['ignore', 'inherit', 'inherit'] });
  return L.waitFor(() => fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').trim(), 10000, 'fake pyroscope')
    .then((port) => ({ proc, url: `http://127.0.0.1:${port}`, address: `127.0.0.1:${port}` }));
}

async function pyroStats(p) {
  const r = await L.httpGet(p.address, '/stats');
  return JSON.parse(r.body);
}

function pod(name, uid, ns, extra) {
  return Object.assign({
    metadata: { name, namespace: ns, uid },
    spec: { nodeName: 'node-a', containers: [{ name: 'app', image: 'ghcr.io/acme/' + name + ':1.2.3' }] },
    status: { phase: 'Running', podIP: '10.0.0.7' },
  }, extra);
}

const state = {
  namespaces: [{ metadata: { name: 'kube-system', uid: 'cluster-7f3a' } }, { metadata: { name: 'shop', uid: 'ns-shop' } }],
  replicasets: [{ metadata: { name: 'web-6f7d8', namespace: 'shop', uid: 'rs-web',
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'dep-web', controller: true }] } }],
  pods: [
    pod('web-6f7d8-x2x9z', 'pod-web', 'shop', {
      metadata: { name: 'web-6f7d8-x2x9z', namespace: 'shop', uid: 'pod-web', labels: { 'pod-template-hash': '6f7d8' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-6f7d8', uid: 'rs-web', controller: true }] },
      spec: { nodeName: 'node-a', containers: [{ name: 'app', image: 'ghcr.io/acme/web:1.2.3' }],
        initContainers: [{ name: 'migrate', image: 'ghcr.io/acme/migrate:1' }] },
      status: { containerStatuses: [{ name: 'app', containerID: 'containerd://' + CID_WEB, restartCount: 0 }],
        initContainerStatuses: [{ name: 'migrate', containerID: 'containerd://' + CID_INIT }] },
    }),
    pod('db-0', POD_UID_DB, 'shop', {
      metadata: { name: 'db-0', namespace: 'shop', uid: POD_UID_DB, annotations: { 'pyroscope.io/service_name': 'postgres' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'sts-db', controller: true }] },
    }),
  ],
};

async function main() {
  if (!haveTools()) {
    console.log('SKIP: openssl and python3 are needed');
    process.exit(77);
  }
  const dir = L.tmpdir('k8s-gw');
  let kube, pyro, gw, session, failed = 0;
  const check = (ok, what) => { console.log(`${ok ? 'ok' : 'not ok'} - ${what}`); if (!ok) failed++; };
  try {
    kube = await startKube(dir, state);
    // The API server answers 401 until told otherwise? No: the kubeconfig's tokenFile holds the accepted token.
    const kubeconfig = path.join(dir, 'kubeconfig');
    fs.writeFileSync(kubeconfig, `apiVersion: v1
kind: Config
current-context: test
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:${kube.port}
    certificate-authority: ca.crt
contexts:
- name: test
  context: {cluster: fake, user: sa}
users:
- name: sa
  user:
    tokenFile: token
`);
    pyro = await startPyroscope(dir);
    gw = await L.startGateway(`
receivers:
  agent:
    endpoint: 127.0.0.1:0
processors:
  k8s_attributes:
    auth_type: kubeConfig
    kube_config_path: ${kubeconfig}
    extract:
      metadata: [k8s.namespace.name, k8s.pod.name, k8s.pod.uid, k8s.deployment.name, k8s.statefulset.name,
                 k8s.container.name, k8s.cluster.uid, container.image.name, container.image.tag,
                 service.name, service.namespace, service.version]
  relabel:
    rules:
      - action: drop
        source_labels: [process.executable.name]
        regex: "noisy-.*"
      - source_labels: [k8s.namespace.name]
        regex: "(.+)"
        target_label: namespace
        replacement: "ns-$1"
exporters:
  otlp_http:
    endpoint: ${pyro.url}
    compression: none
service:
  pipelines:
    profiles: {receivers: [agent], processors: [k8s_attributes, relabel], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
  shutdown_timeout: 10s
`, dir);
    session = await L.connect(`http://${gw.agentAddress}`);
    const world = L.makeWorld(6);
    const instance = crypto.randomBytes(16);
    let seq = 0;
    const S = (i, extra) => Object.assign({
      stackId: world.stacks[i].id, pid: 100 + i, tid: 100 + i, count: 10, start: 1700000000000000000n,
      end: 1700000001000000000n, processName: 'app', executablePath: '/usr/bin/app',
    }, extra);
    const r = await L.push(session, {
      instanceId: instance, sequence: ++seq, nodeName: 'node-a', stacks: world.stacks, executables: world.exes,
      samples: [
        S(0, { containerId: CID_WEB, processName: 'web-server' }),
        S(1, { podUid: POD_UID_DB, processName: 'postgres' }),
        S(2, { containerId: CID_INIT, processName: 'migrate' }),
        S(3, { processName: 'sshd', executablePath: '/usr/sbin/sshd' }),
        S(4, { processName: 'noisy-cron' }),
      ],
    });
    check(r.status === 200 && r.response.accepted === 50, `push accepted (${r.status}, ${JSON.stringify(r.response)})`);

    // A pod that appears later comes through the watch.
    await kube.cmd({ op: 'add', resource: 'pods', object: pod('late-1', 'pod-late', 'shop', {
      status: { containerStatuses: [{ name: 'app', containerID: 'cri-o://' + CID_LATE }] },
      metadata: { name: 'late-1', namespace: 'shop', uid: 'pod-late', labels: { 'app.kubernetes.io/name': 'latecomer' } },
    }) });
    await L.waitFor(async () => (await L.metrics(gw.metricsAddress)).get('stackrelay_gateway_k8s_pods') >= 3, 10000,
      'late pod in the cache');
    const r2 = await L.push(session, { instanceId: instance, sequence: ++seq, nodeName: 'node-a',
      samples: [S(5, { containerId: CID_LATE, processName: 'late' })] });
    check(r2.status === 200 && r2.response.accepted === 10, 'second push accepted');

    const st = await L.waitFor(async () => {
      const s = await pyroStats(pyro);
      return s.accepted_samples >= 50 ? s : null;
    }, 30000, 'samples at the fake Pyroscope');
    const services = {};
    for (const [k, v] of Object.entries(st.by_key)) {
      const svc = k.split('|')[0];
      services[svc] = (services[svc] || 0) + v;
    }
    console.log('# services: ' + JSON.stringify(services));
    // The app container and the init container are both in the web pod.
    check(services.web === 20, 'Deployment pod: service.name = deployment name "web" (app + init container)');
    check(services.postgres === 10, 'matched by k8s.pod.uid: service.name from pyroscope.io/service_name');
    check(!services.migrate && !services['web-server'], 'container samples are not named after their executables');
    check(services.sshd === 10, 'host process: service.name = executable name');
    check(services.latecomer === 10, 'pod added by the watch: service.name from app.kubernetes.io/name');
    check(!Object.keys(services).some((s) => s.startsWith('noisy')), 'relabel dropped the noisy process');
    check(st.accepted_samples === 50, `exactly the kept samples were exported (${st.accepted_samples})`);

    // The fake keeps the decoded shapes of the last request only: send the web container once more and read them.
    const r3 = await L.push(session, { instanceId: instance, sequence: ++seq, nodeName: 'node-a',
      samples: [S(0, { containerId: CID_WEB, processName: 'web-server' })] });
    check(r3.status === 200 && r3.response.accepted === 10, 'third push accepted');
    const st3 = await L.waitFor(async () => {
      const s = await pyroStats(pyro);
      return s.accepted_samples >= 60 ? s : null;
    }, 30000, 'the third push at the fake Pyroscope');
    const attrsOf = (pred) => {
      for (const res of st3.last_shapes.resources || []) if (pred(res.attributes)) return res.attributes;
      return null;
    };
    const web = attrsOf((a) => a['container.id'] === CID_WEB);
    if (web) {
      check(web['k8s.pod.name'] === 'web-6f7d8-x2x9z', 'k8s.pod.name');
      check(web['k8s.namespace.name'] === 'shop', 'k8s.namespace.name');
      check(web['k8s.deployment.name'] === 'web', 'k8s.deployment.name');
      check(web['k8s.container.name'] === 'app', 'k8s.container.name');
      check(web['k8s.cluster.uid'] === 'cluster-7f3a', 'k8s.cluster.uid from the kube-system namespace');
      check(web['container.image.name'] === 'ghcr.io/acme/web' && web['container.image.tag'] === '1.2.3',
        'container.image.name/tag');
      check(web['service.version'] === '1.2.3', 'service.version from the image tag');
      check(web.namespace === 'ns-shop', 'relabel replace wrote namespace=ns-shop');
    } else {
      console.log('# resources in the last request: ' + JSON.stringify(st3.last_shapes.resources));
      check(false, 'the web container\'s resource is in the last export');
    }

    const m = await L.metrics(gw.metricsAddress);
    check(m.get('stackrelay_gateway_k8s_synced') === 1, 'synced gauge');
    // container.id or k8s.pod.uid present: web, init, db, late, web again (sshd and noisy-cron have neither).
    check(m.get('stackrelay_gateway_k8s_lookups_total') >= 5, 'lookups counted');
    check(m.get('stackrelay_gateway_k8s_resources_unmatched_total') === 2, 'unmatched resources counted');
    check(m.get('stackrelay_gateway_k8s_api_watches_total') >= 1, 'watches counted');
    check(m.get('stackrelay_gateway_relabel_resources_dropped_total') === 1, 'relabel drop counted');
    const dropped = m.get('stackrelay_gateway_samples_dropped_total', { component: 'relabel' });
    check(dropped === 10, `relabel's dropped samples are accounted (${dropped})`);
    session.close();
    session = null;
    const code = await L.stopGateway(gw);
    gw = null;
    check(code === 0, `gateway exits 0 on SIGTERM (${code})`);

    // wait_for_metadata: the API server refuses the token (401) until it is rotated; samples are held meanwhile,
    // then exported labelled once the client re-reads the token and lists.
    await kube.cmd({ op: 'accept-token', token: 'sa-token-2' });
    const before = (await pyroStats(pyro)).accepted_samples;
    gw = await L.startGateway(`
receivers:
  agent:
    endpoint: 127.0.0.1:0
processors:
  k8s_attributes:
    auth_type: kubeConfig
    kube_config_path: ${kubeconfig}
    wait_for_metadata: true
    wait_for_metadata_timeout: 60s
    pod_association:
      - sources: [{from: resource_attribute, name: container.id}]
      - sources: [{from: resource_attribute, name: k8s.pod.uid}]
    exclude:
      pods: [{name: "^db-"}]
exporters:
  otlp_http:
    endpoint: ${pyro.url}
    compression: none
service:
  pipelines:
    profiles: {receivers: [agent], processors: [k8s_attributes], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
  shutdown_timeout: 10s
`, dir);
    session = await L.connect(`http://${gw.agentAddress}`);
    const ready = await L.httpGet(gw.metricsAddress, '/readyz');
    check(ready.status === 503, `/readyz is 503 until pod metadata is synced (${ready.status})`);
    const r4 = await L.push(session, { instanceId: crypto.randomBytes(16), sequence: 1, nodeName: 'node-a',
      stacks: world.stacks, executables: world.exes,
      samples: [S(0, { containerId: CID_WEB, processName: 'web-server', count: 7 }),
        S(1, { podUid: POD_UID_DB, processName: 'postgres', count: 3 })] });
    check(r4.status === 200 && r4.response.accepted === 10, 'push accepted while unsynced');
    await L.waitFor(async () => (await L.metrics(gw.metricsAddress)).get('stackrelay_gateway_k8s_api_unauthorized_total') >= 1,
      10000, 'a 401 from the API server');
    const held = (await L.metrics(gw.metricsAddress)).get('stackrelay_gateway_k8s_held_samples');
    check(held === 2, `the sample records are held, not exported unlabelled (held=${held})`);
    check((await pyroStats(pyro)).accepted_samples === before, 'nothing exported before the sync');
    fs.writeFileSync(path.join(dir, 'token'), 'sa-token-2\n'); // the kubelet rotates the projected token
    const st4 = await L.waitFor(async () => {
      const s = await pyroStats(pyro);
      return s.accepted_samples >= before + 10 ? s : null;
    }, 30000, 'held samples exported after the token rotation');
    const dbKey = Object.keys(st4.by_key).find((k) => k.startsWith('unknown_service:postgres|'));
    check(dbKey !== undefined, 'a pod matched by exclude.pods is left unlabelled (unknown_service:postgres)');
    const attrs4 = (st4.last_shapes.resources || []).map((x) => x.attributes).find((a) => a['container.id'] === CID_WEB);
    check(attrs4 && attrs4['k8s.pod.name'] === 'web-6f7d8-x2x9z' && attrs4['service.name'] === 'web',
      'held samples were exported labelled');
    check((await L.httpGet(gw.metricsAddress, '/readyz')).status === 200, '/readyz is 200 after the sync');
    session.close();
    session = null;
    check(await L.stopGateway(gw) === 0, 'second gateway exits 0');
    gw = null;
  } catch (e) {
    failed++;
    console.log('not ok - ' + String(e.stack || e));
    if (gw) console.log('# gateway log:\n' + gw.log());
    if (kube) console.log('# api server log:\n' + kube.log());
  } finally {
    if (session) session.close();
    if (gw) await L.stopGateway(gw).catch(() => {});
    if (kube) kube.proc.stdin.end();
    if (pyro) pyro.proc.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

main();
