// SPDX-License-Identifier: Apache-2.0
//
// Checks the PromQL the chart ships, in rendered manifests (multi-document
// YAML files given after the source root):
//
//   node check-monitoring.mjs SRC FILE...
//
//  1. every expression of a PrometheusRule, and every "expr" of the Grafana
//     dashboards in ConfigMaps labelled grafana_dashboard, parses as PromQL
//     (Prometheus' own grammar, @prometheus-io/lezer-promql);
//  2. every stackrelay_* metric they name is one the gateway or the agent
//     exposes: its name appears in the C sources under gateway/, agent/ or
//     common/ (a histogram's _bucket, _sum and _count by its base name), so
//     renaming a metric cannot leave an alert or a panel silently empty.
//
// Prints one line per problem and exits 1 if there was any; prints what it
// checked and exits 0 otherwise. Fails when the files hold no rule or no
// dashboard at all, so a scenario that stops rendering them is noticed.

import { readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { parser } from "@prometheus-io/lezer-promql";

const [src, ...files] = process.argv.slice(2);
if (!src || files.length === 0) {
  console.error("usage: node check-monitoring.mjs SRC FILE...");
  process.exit(2);
}

// The C sources that define metrics.
function sources(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (/\.[ch]$/.test(name)) out.push(readFileSync(p, "utf8"));
  }
  return out;
}
const code = ["gateway", "agent", "common"].flatMap((d) => sources(path.join(src, d))).join("\n");
const known = new Map();
function exists(name) {
  if (!known.has(name)) {
    const re = new RegExp(`\\b${name}(?![A-Za-z0-9_])`);
    let ok = re.test(code);
    const base = name.replace(/_(bucket|sum|count)$/, "");
    if (!ok && base !== name) ok = new RegExp(`\\b${base}(?![A-Za-z0-9_])`).test(code);
    known.set(name, ok);
  }
  return known.get(name);
}

// Grafana's variables are not PromQL: $__rate_interval and friends stand for
// durations, $var elsewhere for a label value.
function promql(expr) {
  return expr.replace(/\$__(rate_)?interval|\$__range/g, "5m").replace(/\$\{?[A-Za-z_]\w*\}?/g, "x");
}

const problems = [];
let exprs = 0;
let rules = 0;
let dashboards = 0;
const names = new Set();

function check(where, expr) {
  exprs++;
  const text = promql(expr);
  const tree = parser.parse(text);
  let bad = null;
  tree.iterate({
    enter(n) {
      if (n.type.isError && bad === null) bad = n.from;
    },
  });
  if (bad !== null) problems.push(`${where}: not PromQL at offset ${bad}: ${JSON.stringify(expr)}`);
  for (const m of expr.matchAll(/\bstackrelay_[a-z0-9_]+/g)) {
    names.add(m[0]);
    if (!exists(m[0])) problems.push(`${where}: metric ${m[0]} is not exposed by the gateway or the agent`);
  }
}

function walkDashboard(node, where) {
  if (Array.isArray(node)) node.forEach((v, i) => walkDashboard(v, `${where}[${i}]`));
  else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      if (k === "expr" && typeof v === "string") check(`${where}.expr`, v);
      else if (k === "query" && typeof v === "string" && /stackrelay_/.test(v)) {
        // A variable's label_values(SELECTOR, LABEL) is Grafana's, around PromQL.
        const lv = v.match(/^\s*label_values\(\s*([\s\S]+?)\s*,\s*[A-Za-z_]\w*\s*\)\s*$/);
        check(`${where}.query`, lv ? lv[1] : v);
      }
      else walkDashboard(v, `${where}.${k}`);
    }
  }
}

// What Grafana needs to load a dashboard and lay out and fill its panels: a
// uid and title, panels that fit the grid without overlapping, unique panel
// ids, and only variables the dashboard defines.
function checkDashboard(dash, where) {
  if (!dash.uid || !dash.title) problems.push(`${where}: uid and title are required`);
  // Panels in the 24-column grid, none on top of another.
  const boxes = [];
  for (const p of dash.panels || []) {
    const g = p.gridPos || {};
    if (!(g.w > 0 && g.h > 0 && g.x >= 0 && g.y >= 0 && g.x + g.w <= 24)) {
      problems.push(`${where}: panel "${p.title}": gridPos ${JSON.stringify(g)} is not inside the 24-column grid`);
      continue;
    }
    for (const b of boxes) {
      if (g.x < b.g.x + b.g.w && b.g.x < g.x + g.w && g.y < b.g.y + b.g.h && b.g.y < g.y + g.h) {
        problems.push(`${where}: panels "${b.title}" and "${p.title}" overlap`);
      }
    }
    boxes.push({ g, title: p.title });
  }
  const vars = new Set(((dash.templating || {}).list || []).map((v) => v.name));
  const ids = new Set();
  const panels = (dash.panels || []).flatMap((p) => [p, ...(p.panels || [])]);
  for (const p of panels) {
    if (ids.has(p.id)) problems.push(`${where}: panel id ${p.id} used twice`);
    ids.add(p.id);
    const text = JSON.stringify([p.datasource, p.targets || []]);
    for (const m of text.matchAll(/\$\{?([A-Za-z_]\w*)\}?/g)) {
      if (!m[1].startsWith("__") && !vars.has(m[1])) problems.push(`${where}: panel "${p.title}": variable $${m[1]} is not defined`);
    }
  }
}

for (const file of files) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    const obj = doc.toJSON();
    if (!obj) continue;
    const id = `${path.basename(file)}: ${obj.kind}/${(obj.metadata || {}).name}`;
    if (obj.kind === "PrometheusRule") {
      for (const g of (obj.spec || {}).groups || []) {
        for (const r of g.rules || []) {
          rules++;
          check(`${id}: ${g.name}: ${r.alert || r.record}`, String(r.expr));
        }
      }
    } else if (obj.kind === "ConfigMap" && ((obj.metadata || {}).labels || {}).grafana_dashboard !== undefined) {
      for (const [key, json] of Object.entries(obj.data || {})) {
        let dash;
        try {
          dash = JSON.parse(json);
        } catch (e) {
          problems.push(`${id}: ${key}: not JSON: ${e.message}`);
          continue;
        }
        dashboards++;
        walkDashboard(dash, `${id}: ${key}`);
        checkDashboard(dash, `${id}: ${key}`);
      }
    }
  }
}

if (rules === 0) problems.push("no PrometheusRule rules in the rendered manifests");
if (dashboards === 0) problems.push("no Grafana dashboard (ConfigMap labelled grafana_dashboard) in the rendered manifests");
for (const p of problems) console.log(p);
console.log(`check-monitoring: ${rules} rules, ${dashboards} dashboards, ${exprs} expressions, ${names.size} stackrelay metrics, ${problems.length} problems`);
process.exit(problems.length ? 1 : 0);
