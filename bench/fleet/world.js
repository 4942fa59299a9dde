// SPDX-License-Identifier: Apache-2.0
// The simulated fleet's world, deterministic from node and slot numbers so that
// the simulator (sim.js) and the Kubernetes churn driver (kube-churn.js) agree
// on which pods exist at any moment without talking to each other.
//
//  - images: container images; image i at version v has one main executable
//    (its ID changes with the version: a deployment rolls out new binaries),
//    and every process also maps a set of common libraries shared fleet-wide;
//  - pods: node n has `podsPerNode` slots; slot s holds generation
//    g = floor((t - epoch) / podLifetime + phase(n, s)), whose UID and
//    container ID derive from (n, s, g): when g changes, the pod was deleted
//    and a new one created (kube-churn.js does the same at the fake API
//    server);
//  - stacks: a stack template (image, version, t) is shared by every node
//    running that image version; kernel stacks add kernel frames (image
//    offsets, one in four with module frames on top) shared by every node of
//    the kernel build, or runtime addresses of the node's boot (per node).
'use strict';

const crypto = require('node:crypto');

function h(...parts) { return crypto.createHash('sha256').update(parts.join(':')).digest(); }

// A fast 32-bit hash of integers (for frame layouts; IDs that matter use h()).
function mix(...xs) {
  let x = 0x9e3779b9;
  for (const v of xs) {
    x = Math.imul(x ^ (v >>> 0), 0x85ebca6b);
    x ^= x >>> 13;
    x = Math.imul(x, 0xc2b2ae35);
    x ^= x >>> 16;
    x = Math.imul(x ^ Math.floor(v / 4294967296), 0x27d4eb2d);
    x ^= x >>> 15;
  }
  return x >>> 0;
}

// A number in [0, 1) from a name. Remembered: the simulator asks for the same ones every window (a pod slot's
// phase, an image's rollout), a SHA-256 each; the names are bounded by the fleet's size (nodes × slots, images).
const fracs = new Map();
function frac(...parts) {
  const k = parts.join(':');
  let f = fracs.get(k);
  if (f === undefined) { f = h('frac', k).readUInt32LE(0) / 4294967296; fracs.set(k, f); }
  return f;
}

const COMMON_LIBS = 16;
const SYMBOLS_PER_EXE = 256;
const SYMBOL_SPACING = 0x100;
const KERNEL_BASE = 0xffffffff81000000n; // where runtime kernel addresses start (without KASLR)

function libExe(j) {
  return { id: h('lib', j).subarray(0, 20), fileName: `lib${j}.so.1`, path: `/usr/lib/x86_64-linux-gnu/lib${j}.so.1`,
    fileSize: 200000 + j };
}
const libs = Array.from({ length: COMMON_LIBS }, (_, j) => libExe(j));
for (const l of libs) l.hex = l.id.toString('hex');

const exeCache = new Map();
function imageExe(i, v) {
  const k = i * 1e6 + v;
  let e = exeCache.get(k);
  if (!e) { e = makeImageExe(i, v); e.hex = e.id.toString('hex'); exeCache.set(k, e); }
  return e;
}
function makeImageExe(i, v) {
  return { id: h('exe', i, v).subarray(0, 20), fileName: `svc${i}`, path: `/app/svc${i}`, fileSize: 1000000 + i * 7 + v };
}

// The version of image i running at time t (ms): images roll out every deployEvery ms on average.
function imageVersion(i, t, epoch, deployEveryMs) {
  if (!deployEveryMs) return 0;
  return Math.floor((t - epoch) / deployEveryMs + frac('deploy', i));
}

function podGeneration(n, s, t, epoch, lifetimeMs) {
  if (!lifetimeMs) return 0;
  return Math.floor((t - epoch) / lifetimeMs + frac('pod', n, s));
}

function podOf(n, s, g, nImages) {
  const uidHex = h('pod', n, s, g).toString('hex');
  const uid = `${uidHex.slice(0, 8)}-${uidHex.slice(8, 12)}-4${uidHex.slice(13, 16)}-8${uidHex.slice(17, 20)}-${uidHex.slice(20, 32)}`;
  const image = Math.floor(frac('podimage', n, s) * nImages);
  return { name: `svc${image}-n${n}-s${s}-g${g}`, namespace: `team${image % 8}`, uid, image,
    containerId: h('container', n, s, g).toString('hex'), deployment: `svc${image}` };
}

// The Kubernetes object of a pod (what fake-kube-apiserver.js serves).
function podObject(n, s, g, nImages) {
  const p = podOf(n, s, g, nImages);
  return {
    metadata: { name: p.name, namespace: p.namespace, uid: p.uid, labels: { app: p.deployment } },
    spec: { nodeName: `node-${n}`, containers: [{ name: 'app', image: `registry.example/svc${p.image}:1` }] },
    status: { phase: 'Running', containerStatuses: [{ name: 'app', containerID: 'containerd://' + p.containerId,
      restartCount: 0 }] },
  };
}

// A node's kernel as agents that cannot locate frames send it: runtime addresses of this boot (per node).
function kernelOf(n, boot) {
  const id = h('kernel', n, boot).subarray(0, 16);
  return { id, hex: id.toString('hex'), release: '6.1.0-fleet', bootId: h('boot', n, boot).toString('hex'), addressing: 0,
    base: KERNEL_BASE, kind: 'runtime' };
}

// Kernel build b as agents send it (docs/agent-protocol.md, "Kernel frames"): the image with offsets from
// _text and MODULES_PER_BUILD modules with offsets from their load address, under IDs equal on every node and
// boot of the build.
const MODULES_PER_BUILD = 4;
function kernelBuild(b) {
  const release = `6.1.${b}-fleet`;
  const space = (kind, m) => {
    const id = h('kspace', kind, b, m).subarray(0, 16);
    return { id, hex: id.toString('hex'), release, buildId: h('kbuild', kind, b, m).subarray(0, 20),
      addressing: kind === 'image' ? 1 : 2, module: kind === 'image' ? '' : `fleetmod${m}`, base: 0n, kind };
  };
  const modules = [];
  for (let m = 0; m < MODULES_PER_BUILD; m++) modules.push(space('module', m));
  return { image: space('image', 0), modules };
}

// Frames of stack template t of image i at version v: main-executable frames
// at the bottom, a library tail on top (libc, ssl, ...).
function templateFrames(i, v, t) {
  const exe = imageExe(i, v);
  const depth = 6 + (t % 23);
  const frames = [];
  for (let d = 0; d < depth; d++) {
    const r = mix(i, v, t, d);
    const useLib = d < 3 && (r & 1) === 0;
    const e = useLib ? libs[(r >>> 1) % COMMON_LIBS] : exe;
    const sym = (r >>> 8) % SYMBOLS_PER_EXE;
    frames.push({ exe: e.id, hex: e.hex, address: 0x1000 + sym * SYMBOL_SPACING + (d % 16) * 4, kind: 1 });
  }
  return frames;
}

// Kernel frames on top of a stack: 256 functions of the kernel's symbol table, spread over it (kernelSymbols, a
// multiple of 256, sizes the table; the frames and so the locations stay the same), at the space's base
// (runtime addresses or image offsets).
function kernelFrames(kernel, t, kernelSymbols = SYMBOLS_PER_EXE) {
  const frames = [], stride = Math.floor(kernelSymbols / SYMBOLS_PER_EXE);
  for (let d = 0; d < 2 + (t % 4); d++)
    frames.push({ exe: kernel.id,
      address: kernel.base + BigInt(((t * 31 + d * 17) % SYMBOLS_PER_EXE) * stride * SYMBOL_SPACING), kind: 2 });
  return frames;
}

// 2-4 frames in a module (offsets into its 256 functions), for the top of a kernel stack.
function moduleFrames(mod, t) {
  const frames = [];
  for (let d = 0; d < 2 + ((t >>> 2) % 3); d++)
    frames.push({ exe: mod.id, address: BigInt(((t * 13 + d * 7) % SYMBOLS_PER_EXE) * SYMBOL_SPACING + 8), kind: 2 });
  return frames;
}

// A synthetic symbol table for an executable or a kernel space (same layout for every ID); a kernel image's
// has n symbols (kallsyms-style: no sizes; a real one has 100 k-300 k), a module's 256, from the space's base.
function symbolsFor(name, kernel, n = SYMBOLS_PER_EXE, base = KERNEL_BASE) {
  const out = [];
  for (let j = 0; j < (kernel ? n : SYMBOLS_PER_EXE); j++)
    out.push({ address: kernel ? base + BigInt(j * SYMBOL_SPACING) : 0x1000 + j * SYMBOL_SPACING,
      size: kernel ? 0 : SYMBOL_SPACING, name: `${name}_fn${j}` });
  return out;
}

module.exports = { h, mix, frac, libs, imageExe, imageVersion, podGeneration, podOf, podObject, kernelOf, kernelBuild,
  templateFrames, kernelFrames, moduleFrames, symbolsFor, COMMON_LIBS };
