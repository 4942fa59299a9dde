#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// The gateway against a hostile peer (docs/security.md, "The gateway against
// hostile peers"). A real gateway with mTLS, node binding
// (tls.client_identity.bind_node_name) and a symbolize processor; a victim
// agent on node-a and an attacker holding a valid certificate for node-b:
// - the attacker's symbol table for the victim's executable, unasked (before
//   and after the victim is asked), is refused and counted; its samples in
//   the same request are accepted; an error-only table unasked is ignored;
// - the victim, asked, uploads; the export names the victim's frames with
//   the victim's names, never the attacker's;
// - an ExecutableDef whose path climbs out of the debug directory ("..") is
//   refused and counted, and its frames are not named from the host's libz;
// - the node-b certificate claiming node-a is answered 403 and counted; so is
//   a request whose node token (auth.node_tokens_file) is another node's.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const L = require('./gw-lib.js');

(async () => {
  const dir = L.tmpdir('gw-hostile');
  let failed = 0, gw;
  const step = async (name, fn) => {
    try { await fn(); console.log(`ok - ${name}`); } catch (e) {
      failed++;
      console.log(`not ok - ${name}\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
    }
  };
  const certs = L.makeCerts(dir);
  // Client certificates for two nodes, signed by the gateway's client CA.
  const nodeCert = (node) => {
    const run = (args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
    run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${node}.key`,
      '-out', `${node}.csr`, '-subj', `/CN=system:node:${node}`]);
    run(['x509', '-req', '-in', `${node}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', `${node}.crt`, '-days', '2']);
    return { ca: fs.readFileSync(certs.caFile), cert: fs.readFileSync(path.join(dir, `${node}.crt`)),
      key: fs.readFileSync(path.join(dir, `${node}.key`)), servername: 'localhost' };
  };
  const nodeA = nodeCert('node-a'), nodeB = nodeCert('node-b');
  fs.mkdirSync(path.join(dir, 'debug'));
  const out = path.join(dir, 'otlp.jsonl');

  // The victim's executable (a build ID nothing local or debuginfod knows) and a stack in it.
  const victimExe = { id: L.id('victim-exe', 0, 20), idKind: 1, fileName: 'victim', path: '/usr/bin/victim',
    fileSize: 4096 };
  victimExe.gnuBuildId = victimExe.id;
  const VICTIM_PC = 0x401234;
  const victimStack = { id: L.id('victim-stack', 0), frames: [{ exe: victimExe.id, address: VICTIM_PC, kind: 1 }] };
  // The attacker's own stack, in the same executable (it is content-addressed: anyone can name it).
  const attackerStack = { id: L.id('attacker-stack', 0), frames: [{ exe: victimExe.id, address: VICTIM_PC + 8,
    kind: 1 }] };
  // An executable without a build ID whose path climbs from the debug directory to the host's libz.
  const TRAV_PC = 0x2000;
  const travExe = { id: L.id('trav-exe', 0, 16), idKind: 2, fileName: 'x',
    path: '/../../../../../../../../../lib/x86_64-linux-gnu/x', debuglink: 'libz.so.1', fileSize: 100 };
  const travStack = { id: L.id('trav-stack', 0), frames: [{ exe: travExe.id, address: TRAV_PC, kind: 1 }] };
  const samples = (st, n, proc) => [{ stackId: st.id, pid: 7, tid: 7, count: n, processName: proc }];

  try {
    gw = await L.startGateway(`
receivers:
  agent:
    endpoint: 127.0.0.1:0
    tls:
      cert_file: ${certs.serverCert}
      key_file: ${certs.serverKey}
      client_ca_file: ${certs.caFile}
      client_identity: {bind_node_name: true, node_name_template: "system:node:{node}"}
processors:
  symbolize: {cache_dir: ${dir}/cache, debug_dirs: [${dir}/debug], debuginfod_urls: [], wait_for_symbols: 5s}
  batch: {timeout: 1s}
exporters:
  file: {path: ${out}, format: json}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [symbolize, batch], exporters: [file]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
`, dir);
    const url = `https://${gw.agentAddress}`;
    const victim = await L.connect(url, nodeA), attacker = await L.connect(url, nodeB);
    const V = crypto.randomBytes(16), A = crypto.randomBytes(16);
    const metric = async (name, labels) => (await L.metrics(gw.metricsAddress)).get(name, labels) ?? 0;
    const evil = { exe: victimExe.id, symbols: [{ address: VICTIM_PC - 0x34, size: 0x100, name: 'evil_renamed' }] };
    let accepted = 0;

    let vseq = 0;
    await step('the victim defines its executable and is asked for its table', async () => {
      // Its samples reach the symbolize processor, which finds no source: the victim's next answers ask it
      // (and, one agent at a time, nobody else for 30 s).
      vseq = await L.waitAsked(victim, V, [victimExe.id], { nodeName: 'node-a', executables: [victimExe],
        stacks: [victimStack], samples: samples(victimStack, 3, 'victim') }, { sequence: 1 });
      accepted += 3;
    });

    await step('an unrequested table for the victim\'s executable is refused; the samples beside it are accepted',
      async () => {
        const r = await L.push(attacker, { instanceId: A, sequence: 1, nodeName: 'node-b', executables: [victimExe],
          stacks: [attackerStack], samples: samples(attackerStack, 5, 'attacker'), symbolTables: [evil] });
        assert.equal(r.status, 200, r.response.error);
        assert.equal(r.response.accepted, 5);
        accepted += 5;
        assert.equal(await metric('stackrelay_gateway_agent_symbol_tables_refused_total', { reason: 'not_asked' }), 1);
      });

    await step('an error-only table nobody asked for is ignored and counted', async () => {
      const r = await L.push(attacker, { instanceId: A, sequence: 2, nodeName: 'node-b',
        symbolTables: [{ exe: victimExe.id, error: 'cannot read' }] });
      assert.equal(r.status, 200, r.response.error);
      assert.equal(await metric('stackrelay_gateway_agent_symbol_tables_refused_total',
        { reason: 'error_not_asked' }), 1);
    });

    await step('the victim, asked, uploads; the attacker\'s table after that is refused too', async () => {
      let r = await L.push(victim, { instanceId: V, sequence: vseq, nodeName: 'node-a', symbolTables: [{
        exe: victimExe.id, symbols: [{ address: VICTIM_PC - 0x34, size: 0x100, name: 'victim_fn' }] }] });
      assert.equal(r.status, 200, r.response.error);
      r = await L.push(attacker, { instanceId: A, sequence: 3, nodeName: 'node-b', symbolTables: [evil] });
      assert.equal(r.status, 200, r.response.error);
      assert.equal(await metric('stackrelay_gateway_agent_symbol_tables_refused_total', { reason: 'not_asked' }), 2);
      assert.equal(await metric('stackrelay_gateway_agent_symbol_tables_total'), 1);
    });

    await step('a path with ".." is not looked up in the debug directory', async () => {
      const r = await L.push(attacker, { instanceId: A, sequence: 4, nodeName: 'node-b', executables: [travExe],
        stacks: [travStack], samples: samples(travStack, 2, 'trav') });
      assert.equal(r.status, 200, r.response.error);
      assert.equal(r.response.accepted, 2);
      accepted += 2;
      await L.waitFor(async () => await metric('stackrelay_gateway_symbolize_debug_paths_refused_dot_dot_total') >= 1,
        15000, 'the traversal to be counted');
    });

    await step('a node-b certificate speaking for node-a is refused (403) and counted', async () => {
      const r = await L.push(attacker, { instanceId: A, sequence: 5, nodeName: 'node-a',
        stacks: [attackerStack], samples: samples(attackerStack, 4, 'impostor') });
      assert.equal(r.status, 403);
      assert.match(r.response.error, /node_name "node-a"/);
      assert.equal(await metric('stackrelay_gateway_agent_identity_refusals_total'), 1);
    });

    await step('no frame of the victim is renamed; nothing accepted is lost', async () => {
      await L.waitFor(async () => await metric('stackrelay_gateway_samples_exported_total', { component: 'file' }) >=
        accepted, 30000, 'the export');
      const names = new Map(); // location address -> names
      let total = 0;
      for (const line of fs.readFileSync(out, 'utf8').split('\n').filter(Boolean)) {
        const req = JSON.parse(line);
        const d = req.dictionary || {};
        const strings = d.stringTable || [], funcs = d.functionTable || [], locs = d.locationTable || [];
        for (const loc of locs) {
          const a = Number(loc.address || 0);
          const n = (loc.lines || []).map((ln) => strings[(funcs[ln.functionIndex || 0] || {}).nameStrindex || 0]);
          names.set(a, [...(names.get(a) || []), ...n]);
        }
        for (const rp of req.resourceProfiles || [])
          for (const sp of rp.scopeProfiles || [])
            for (const p of sp.profiles || [])
              for (const s of p.samples || []) total += (s.values || []).reduce((x, v) => x + Number(v), 0) ||
                (s.timestampsUnixNano || []).length;
      }
      assert.equal(total, accepted);
      const all = [...names.values()].flat();
      assert.ok(!all.includes('evil_renamed'), `a frame was renamed: ${JSON.stringify([...names])}`);
      assert.ok((names.get(VICTIM_PC) || []).includes('victim_fn'), `victim frames: ${names.get(VICTIM_PC)}`);
      // Unnamed, or named by the fallback (<binary>+0x<address>): never by a symbol of the host's libz.
      for (const n of names.get(TRAV_PC) || [])
        assert.match(n, /\+0x/, `the traversal frame was named ${n}`);
    });
    victim.close();
    attacker.close();

    await step('one token per node (auth.node_tokens_file): a token speaks for its own node only', async () => {
      const tokens = path.join(dir, 'node-tokens');
      fs.writeFileSync(tokens, '# node token\nnode-a tok-a-0123456789\nnode-b tok-b-0123456789\n', { mode: 0o600 });
      const g2 = await L.startGateway(`
receivers:
  agent:
    endpoint: 127.0.0.1:0
    auth: {node_tokens_file: ${tokens}}
exporters:
  file: {path: ${dir}/otlp2.jsonl, format: json}
service:
  pipelines:
    profiles: {receivers: [agent], exporters: [file]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
`, dir);
      try {
        const s2 = await L.connect(`http://${g2.agentAddress}`);
        const req = (node, seq) => ({ instanceId: A, sequence: seq, nodeName: node, executables: [victimExe],
          stacks: [attackerStack], samples: samples(attackerStack, 1, 'p') });
        const as = (tok) => ({ headers: { authorization: `Bearer ${tok}` } });
        let r = await L.push(s2, req('node-b', 1), as('tok-b-0123456789'));
        assert.equal(r.status, 200, r.response.error);
        assert.equal(r.response.accepted, 1);
        r = await L.push(s2, req('node-a', 2), as('tok-b-0123456789'));
        assert.equal(r.status, 403);
        assert.match(r.response.error, /node_name "node-a"/);
        r = await L.push(s2, req('node-b', 3), as('tok-unknown'));
        assert.equal(r.status, 401);
        const m = await L.metrics(g2.metricsAddress);
        assert.equal(m.get('stackrelay_gateway_agent_identity_refusals_total'), 1);
        assert.equal(m.get('stackrelay_gateway_agent_auth_failures_total'), 1);
        s2.close();
      } finally {
        await L.stopGateway(g2).catch(() => {});
      }
    });
  } catch (e) {
    failed++;
    console.log(`not ok - setup\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
  } finally {
    if (gw) await L.stopGateway(gw).catch(() => {});
  }
  if (failed) console.log(`# gateway log: ${dir}`);
  process.exit(failed ? 1 : 0);
})();
