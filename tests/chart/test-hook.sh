#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The chart's `helm test` Pod (templates/tests/gateway-test.yaml) against a
# real gateway: its script, as rendered in tests/chart/golden/basic.yaml, is
# run with the Pod's environment pointed at a gateway on 127.0.0.1 and must
# pass; pointed at an agent port where nothing listens, it must fail and say
# which check failed. Run by meson (suite ship) with SR_SOURCE_ROOT,
# SR_BUILD_ROOT, SR_AGENT and SR_GATEWAY set.
set -euo pipefail
. "${SR_SOURCE_ROOT:?}/tests/integration/lib.sh"
sr_require_tools node bash
[ -d "$src/tests/chart/node_modules/yaml" ] || { echo "SKIP: npm packages of tests/chart are not installed"; exit 77; }
sr_workdir chart-hook

# The test Pod's script, from the rendered manifest.
node --input-type=module - "$src/tests/chart/golden/basic.yaml" "$work/hook.sh" <<'JS'
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
const require = createRequire(process.env.SR_SOURCE_ROOT + "/tests/chart/package.json");
const { parseAllDocuments } = require("yaml");
const [file, out] = process.argv.slice(2);
const pods = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJSON())
  .filter((o) => o && o.kind === "Pod" && (o.metadata.annotations || {})["helm.sh/hook"] === "test");
if (pods.length !== 1) throw new Error(`${file}: ${pods.length} test Pods, expected 1`);
const c = pods[0].spec.containers[0];
if (c.command[0] !== "/bin/bash" || c.command[1] !== "-c") throw new Error(`unexpected command ${c.command}`);
writeFileSync(out, c.command[2]);
JS

port_metrics=$(free_port)
port_agent=$(free_port)
cat >"$work/gateway.yaml" <<YAML
receivers:
  agent:
    endpoint: 127.0.0.1:$port_agent
processors:
  batch: {}
exporters:
  pprof:
    directory: $work/out
service:
  pipelines:
    profiles:
      receivers: [agent]
      processors: [batch]
      exporters: [pprof]
  telemetry:
    metrics:
      address: 127.0.0.1:$port_metrics
YAML
sr_start_gateway

# hook AGENT_PORT: the Pod's script with the environment the chart gives it.
hook() {
	NAMESPACE=test METRICS_HOST=127.0.0.1 METRICS_PORT=$port_metrics AGENT_HOST=127.0.0.1 AGENT_PORT=$1 \
		bash "$work/hook.sh" >"$work/hook.out" 2>&1
}

if hook "$port_agent" && [ "$(grep -c '^ok - ' "$work/hook.out")" = 3 ]; then
	ok "the test Pod's checks pass against a ready gateway"
else
	bad "the test Pod's checks fail against a ready gateway:"
	sed 's/^/    /' "$work/hook.out"
fi

closed=$(free_port)
if hook "$closed"; then
	bad "the test Pod passed with nothing listening on the agent port"
elif grep -q "^not ok - 127.0.0.1:$closed: no connection" "$work/hook.out" &&
	grep -q "^the gateway does not answer" "$work/hook.out"; then
	ok "the test Pod fails, naming the check, when the agent port is closed"
else
	bad "the test Pod failed without saying why:"
	sed 's/^/    /' "$work/hook.out"
fi

exit $fail
