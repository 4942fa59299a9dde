// SPDX-License-Identifier: Apache-2.0
//
// Prints the path of every value in a chart's values.yaml that a user sets:
// scalars, lists, empty mappings, and mappings that are free-form (their
// keys are not the chart's: configs, resources, security contexts, ...).
// test-chart.sh checks each is documented in docs/install-kubernetes.md.
import { readFileSync } from "node:fs";
import { parse } from "yaml";

export const freeForm = new Set(["config", "extraConfig", "resources", "podSecurityContext", "securityContext",
  "seccompProfile", "updateStrategy", "nodeSelector", "headers"]);

function walk(v, path) {
  if (v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length > 0 &&
      !freeForm.has(path[path.length - 1])) {
    for (const [k, sub] of Object.entries(v)) walk(sub, [...path, k]);
  } else {
    console.log(path.join("."));
  }
}
// Run as a script (not imported by chart-readme.mjs).
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  walk(parse(readFileSync(process.argv[2], "utf8")), []);
}
