// SPDX-License-Identifier: Apache-2.0
//
// Validates rendered Kubernetes manifests (multi-document YAML files given as
// arguments) against the Kubernetes OpenAPI schemas, as packaged by the
// `kubernetes-models` npm packages:
//
//  1. each object's model validator (generated from the API server's OpenAPI
//     document): types, required fields, enums, formats;
//  2. unknown fields, which the generated validators let through but
//     `kubectl apply` (strict field validation, the default since 1.27)
//     rejects: checked against the field lists of the models' type
//     declarations, recursively;
//  3. what the API server checks beyond the schema and a chart gets wrong
//     most: names (DNS-1123 / DNS-1035 and 63 characters), label keys and
//     values, duplicate objects, selectors that do not match their template,
//     NetworkPolicies whose pod selectors select none of the rendered pods
//     (a policy that selects nothing leaves the pods open; a peer that
//     matches nothing shuts their clients out).
//
// Prints one line per problem ("FILE: Kind/name: path: message") and exits 1
// if there was any, 0 otherwise.

import { readFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);
const here = path.dirname(new URL(import.meta.url).pathname);
const nodeModules = path.join(here, "node_modules");

// apiVersion group -> [package, directory inside it]
function modelLocation(apiVersion) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "monitoring.coreos.com") {
    return { pkg: "@kubernetes-models/prometheus-operator", dir: `${group}/${version}` };
  }
  if (group === "cert-manager.io") {
    return { pkg: "@kubernetes-models/cert-manager", dir: `${group}/${version}` };
  }
  return { pkg: "kubernetes-models", dir: group ? `${group}/${version}` : version };
}

// ---- type declarations -> field lists -------------------------------------

const fileCache = new Map();

function stripComments(src) {
  return src.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

// Splits s at top-level occurrences of sep (outside {}, <>, ()).
function splitTop(s, sep) {
  const out = [];
  let depth = 0;
  let cur = "";
  for (const ch of s) {
    if (ch === "{" || ch === "<" || ch === "(") depth++;
    if (ch === "}" || ch === ">" || ch === ")") depth--;
    if (ch === sep && depth === 0) {
      out.push(cur);
      cur = "";
    } else {
      cur += ch;
    }
  }
  if (cur.trim()) out.push(cur);
  return out;
}

function matchBrace(s, open) {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    if (s[i] === "{") depth++;
    else if (s[i] === "}" && --depth === 0) return i;
  }
  throw new Error("unbalanced braces");
}

function parseProps(body, file) {
  const props = new Map();
  for (const member of splitTop(body, ";")) {
    const m = member.trim().match(/^"?([A-Za-z0-9_$@.\-]+)"?\??\s*:\s*([\s\S]+)$/);
    if (m) props.set(m[1], parseType(m[2].trim(), file));
  }
  return props;
}

function parseType(t, file) {
  t = t.trim();
  const arr = t.match(/^Array<([\s\S]*)>$/);
  if (arr) return { array: parseType(arr[1], file) };
  if (t.startsWith("{")) {
    const inner = t.slice(1, matchBrace(t, 0)).trim();
    const map = inner.match(/^\[key: string\]\s*:\s*([\s\S]*?);?$/);
    if (map) return { map: parseType(map[1], file) };
    return { object: { props: parseProps(inner, file), typeMeta: false } };
  }
  if (splitTop(t, "|").length > 1) return { prim: true };
  if (/^[A-Za-z_$][\w$]*$/.test(t) && !["string", "number", "boolean", "any", "unknown", "object"].includes(t)) {
    return { ref: t, file };
  }
  return { prim: true };
}

function loadDecl(file) {
  if (fileCache.has(file)) return fileCache.get(file);
  const src = stripComments(readFileSync(file, "utf8"));
  const imports = new Map();
  for (const m of src.matchAll(/import\s*\{([^}]*)\}\s*from\s*"([^"]+)"/g)) {
    let target = m[2];
    if (target.startsWith(".")) target = path.resolve(path.dirname(file), target.replace(/\.js$/, ".d.ts"));
    else target = path.join(nodeModules, target + ".d.ts");
    for (const name of m[1].split(",").map((x) => x.trim()).filter(Boolean)) imports.set(name, target);
  }
  const aliases = new Map();
  for (const m of src.matchAll(/export type \{([^}]*)\}/g)) {
    for (const pair of m[1].split(",")) {
      const [local, , exported] = pair.trim().split(/\s+/);
      if (exported) aliases.set(exported, local);
    }
  }
  const interfaces = new Map();
  for (const m of src.matchAll(/export interface (\w+)(\s+extends\s+([\w, ]+))?\s*\{/g)) {
    const open = m.index + m[0].length - 1;
    const body = src.slice(open + 1, matchBrace(src, open));
    // Interfaces that extend others (cert-manager's IssuerSpec extends
    // IssuerConfig) get the bases' fields in resolve().
    const bases = (m[3] || "").split(",").map((x) => x.trim()).filter((x) => x && x !== "TypeMeta");
    interfaces.set(m[1], { props: parseProps(body, file), typeMeta: /TypeMeta/.test(m[3] || ""), bases, file });
  }
  const decl = { imports, aliases, interfaces };
  fileCache.set(file, decl);
  return decl;
}

// The interface a type name refers to from file, or null (type alias,
// primitive wrapper like IntOrString or Quantity, or unknown: not checked).
function resolve(name, file) {
  return withBases(resolveOwn(name, file));
}

function resolveOwn(name, file) {
  const decl = loadDecl(file);
  if (decl.interfaces.has(name)) return decl.interfaces.get(name);
  const local = decl.aliases.get(name);
  if (local && decl.interfaces.has(local)) return decl.interfaces.get(local);
  const target = decl.imports.get(name);
  if (!target || !existsSync(target)) return null;
  const tdecl = loadDecl(target);
  const tlocal = tdecl.aliases.get(name) || name;
  return tdecl.interfaces.get(tlocal) || null;
}

// An interface with the fields of the interfaces it extends; an unknown
// base leaves it unchecked (null) rather than reporting fields as unknown.
function withBases(iface) {
  if (!iface || !iface.bases || iface.bases.length === 0) return iface;
  if (iface.merged !== undefined) return iface.merged;
  const props = new Map(iface.props);
  for (const base of iface.bases) {
    const b = resolve(base, iface.file);
    if (!b) return (iface.merged = null);
    for (const [k, v] of b.props) if (!props.has(k)) props.set(k, v);
  }
  return (iface.merged = { props, typeMeta: iface.typeMeta });
}

function checkFields(value, type, where, problems) {
  if (value === null || value === undefined || !type || type.prim) return;
  if (type.array) {
    if (Array.isArray(value)) value.forEach((v, i) => checkFields(v, type.array, `${where}[${i}]`, problems));
    return;
  }
  if (type.map) {
    if (typeof value === "object" && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) checkFields(v, type.map, `${where}.${k}`, problems);
    }
    return;
  }
  const iface = type.object || (type.ref ? resolve(type.ref, type.file) : null);
  if (!iface || typeof value !== "object" || Array.isArray(value)) return;
  for (const [k, v] of Object.entries(value)) {
    if (iface.typeMeta && (k === "apiVersion" || k === "kind")) continue;
    if (!iface.props.has(k)) {
      problems.push(`${where ? where + "." : ""}${k}: unknown field`);
      continue;
    }
    checkFields(v, iface.props.get(k), `${where ? where + "." : ""}${k}`, problems);
  }
}

// ---- API-server rules beyond the schema -----------------------------------

const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const dns1035Label = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const labelName = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const clusterScoped = new Set(["ClusterRole", "ClusterRoleBinding", "PriorityClass", "Namespace", "StorageClass"]);

function checkLabels(labels, where, problems) {
  for (const [k, v] of Object.entries(labels || {})) {
    const parts = k.split("/");
    const name = parts.pop();
    const prefix = parts.join("/");
    if (parts.length > 1 || (prefix && (prefix.length > 253 || !dns1123Subdomain.test(prefix)))) {
      problems.push(`${where}: label key ${JSON.stringify(k)}: bad prefix`);
    }
    if (name.length > 63 || !labelName.test(name)) problems.push(`${where}: label key ${JSON.stringify(k)}: bad name`);
    if (typeof v !== "string") problems.push(`${where}: label ${k}: value must be a string, got ${typeof v}`);
    else if (v.length > 63 || !labelValue.test(v)) problems.push(`${where}: label ${k}: bad value ${JSON.stringify(v)}`);
  }
}

function checkServerRules(obj, problems) {
  const meta = obj.metadata || {};
  const name = meta.name || "";
  if (!name) problems.push("metadata.name: required");
  const nameRe = obj.kind === "Service" ? dns1035Label : dns1123Subdomain;
  const maxLen = obj.kind === "Service" ? 63 : 253;
  if (name && (name.length > maxLen || !nameRe.test(name))) problems.push(`metadata.name: ${JSON.stringify(name)} is not a valid ${obj.kind} name`);
  if (clusterScoped.has(obj.kind) && meta.namespace) problems.push("metadata.namespace: set on a cluster-scoped object");
  if (!clusterScoped.has(obj.kind) && !meta.namespace) problems.push("metadata.namespace: missing (the release namespace should be explicit)");
  checkLabels(meta.labels, "metadata.labels", problems);
  const tmpl = obj.spec && obj.spec.template;
  if (tmpl) {
    checkLabels(tmpl.metadata && tmpl.metadata.labels, "spec.template.metadata.labels", problems);
    const sel = (obj.spec.selector && obj.spec.selector.matchLabels) || {};
    for (const [k, v] of Object.entries(sel)) {
      if (((tmpl.metadata || {}).labels || {})[k] !== v) problems.push(`spec.selector.matchLabels.${k}: does not match the pod template`);
    }
    const podSpec = tmpl.spec || {};
    const volumes = new Set((podSpec.volumes || []).map((v) => v.name));
    const claims = new Set(((obj.spec.volumeClaimTemplates || []).map((c) => c.metadata && c.metadata.name)));
    for (const c of [...(podSpec.initContainers || []), ...(podSpec.containers || [])]) {
      if (c.name && (c.name.length > 63 || !dns1035Label.test(c.name))) problems.push(`container name ${JSON.stringify(c.name)}: not a DNS-1035 label`);
      for (const p of c.ports || []) {
        if (p.name && (p.name.length > 15 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(p.name) || !/[a-z]/.test(p.name))) {
          problems.push(`container ${c.name}: port name ${JSON.stringify(p.name)} is not an IANA_SVC_NAME`);
        }
      }
      for (const m of c.volumeMounts || []) {
        if (!volumes.has(m.name) && !claims.has(m.name)) problems.push(`container ${c.name}: volumeMount ${m.name}: no such volume`);
      }
    }
  }
}

// ---- main -------------------------------------------------------------------

const problems = [];
const seen = new Set();
let objects = 0;

const workloadKinds = new Set(["Deployment", "StatefulSet", "DaemonSet"]);
const matches = (sel, labels) => Object.entries(sel || {}).every(([k, v]) => (labels || {})[k] === v);

// NetworkPolicy pod selectors (the policy's and its same-namespace peers')
// against the pod templates rendered with them.
function checkNetworkPolicies(objs) {
  const out = [];
  const pods = objs.filter((o) => workloadKinds.has(o.kind)).map((o) => ({
    ns: (o.metadata || {}).namespace,
    labels: ((((o.spec || {}).template || {}).metadata) || {}).labels || {},
  }));
  // Bare Pods (Helm test hooks) are selected by their own labels.
  for (const o of objs.filter((x) => x.kind === "Pod")) {
    pods.push({ ns: (o.metadata || {}).namespace, labels: (o.metadata || {}).labels || {} });
  }
  for (const np of objs.filter((o) => o.kind === "NetworkPolicy")) {
    const ns = (np.metadata || {}).namespace;
    const id = `NetworkPolicy/${(np.metadata || {}).name}`;
    const selects = (sel) => pods.some((p) => p.ns === ns && matches(sel, p.labels));
    const own = ((np.spec || {}).podSelector || {}).matchLabels;
    if (own && !selects(own)) out.push(`${id}: spec.podSelector selects none of the rendered pods`);
    ((np.spec || {}).ingress || []).forEach((rule, i) => {
      (rule.from || []).forEach((peer, j) => {
        const sel = (peer.podSelector || {}).matchLabels;
        if (sel && Object.keys(sel).length && !peer.namespaceSelector && !selects(sel)) {
          out.push(`${id}: spec.ingress[${i}].from[${j}].podSelector selects none of the rendered pods`);
        }
      });
    });
  }
  return out;
}

for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  const fileObjects = [];
  for (const doc of docs) {
    if (doc.errors.length) {
      problems.push(`${file}: YAML: ${doc.errors[0].message}`);
      continue;
    }
    const obj = doc.toJSON();
    if (obj === null || obj === undefined) continue;
    objects++;
    fileObjects.push(obj);
    const id = `${obj.kind}/${(obj.metadata || {}).name}`;
    const local = [];
    const key = `${file} ${obj.apiVersion} ${id} ${(obj.metadata || {}).namespace || ""}`;
    if (seen.has(key)) local.push("defined twice");
    seen.add(key);

    const loc = modelLocation(obj.apiVersion || "");
    const declFile = path.join(nodeModules, loc.pkg, loc.dir, `${obj.kind}.d.ts`);
    if (!existsSync(declFile)) {
      local.push(`no schema for apiVersion ${obj.apiVersion} kind ${obj.kind}`);
    } else {
      const mod = await import(`${loc.pkg}/${loc.dir}/${obj.kind}`);
      try {
        new mod[obj.kind](obj).validate();
      } catch (e) {
        for (const line of String(e.message).split(/,\s*(?=data)/)) local.push(line.replace(/^data\/?/, "/"));
      }
      checkFields(obj, { ref: `I${obj.kind}`, file: declFile }, "", local);
    }
    checkServerRules(obj, local);
    for (const p of local) problems.push(`${file}: ${id}: ${p}`);
  }
  for (const p of checkNetworkPolicies(fileObjects)) problems.push(`${file}: ${p}`);
}

for (const p of problems) console.log(p);
console.log(`validate: ${objects} objects, ${problems.length} problems`);
process.exit(problems.length ? 1 : 0);
