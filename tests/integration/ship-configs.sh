#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Every config stackrelay ships must load in the real binaries, so that docs,
# chart and code cannot drift apart:
#   - packaging/config/{agent,gateway}.yaml (installed to /etc/stackrelay);
#   - the agent.yaml and gateway.yaml the Helm chart renders into its
#     ConfigMaps, for every CI scenario (tests/chart/golden/*.yaml, which the
#     ship-chart test keeps equal to the chart's output).
# Each goes through `--validate`: schema, unknown keys, pipeline references.
set -euo pipefail

src=${SR_SOURCE_ROOT:?}
agent=${SR_AGENT:?}
gateway=${SR_GATEWAY:?}
work=$(mktemp -d "${TMPDIR:-/tmp}/sr-configs.XXXXXX")
trap 'rm -rf "$work"' EXIT

# What the chart's pods and the systemd units provide as environment.
export NODE_NAME=node-1 PYROSCOPE_TOKEN=test-token
# The chart's pyroscope.existingSecret keys, as the gateway pods get them.
export PYROSCOPE_TENANT_ID=tenant-1 PYROSCOPE_BASIC_AUTH_USERNAME=123456 PYROSCOPE_BASIC_AUTH_PASSWORD=glc-token \
	PYROSCOPE_BEARER_TOKEN=bearer-token
# The chart's agent.otlp.existingSecret keys, as the agent pods get them.
export OTLP_TENANT_ID=tenant-1 OTLP_BEARER_TOKEN=otlp-token

passed=0
failed=0
check() { # NAME BINARY FILE
	if "$2" --validate --config "$3" >"$work/out" 2>&1; then
		echo "ok - $1"
		passed=$((passed + 1))
	else
		echo "not ok - $1:"
		sed 's/^/    /' "$work/out"
		failed=$((failed + 1))
	fi
}

check "packaging/config/agent.yaml" "$agent" "$src/packaging/config/agent.yaml"
check "packaging/config/gateway.yaml" "$gateway" "$src/packaging/config/gateway.yaml"

# extract FILE KEY: the literal block "  KEY: |" of a ConfigMap in a
# rendered manifest, de-indented.
extract() {
	awk -v key="  $2: |" '
		$0 == key { on = 1; next }
		on && /^    / { print substr($0, 5); next }
		on && /^$/ { print ""; next }
		on { exit }
	' "$1"
}

shopt -s nullglob
goldens=("$src"/tests/chart/golden/*.yaml)
[ ${#goldens[@]} -gt 0 ] || { echo "not ok - no rendered chart manifests in tests/chart/golden"; exit 1; }
for g in "${goldens[@]}"; do
	scenario=$(basename "$g" .yaml)
	for pair in "agent.yaml:$agent" "gateway.yaml:$gateway"; do
		key=${pair%%:*}
		out=$work/$scenario-$key
		extract "$g" "$key" >"$out"
		if [ ! -s "$out" ]; then
			echo "not ok - chart $scenario: no $key in the rendered ConfigMaps"
			failed=$((failed + 1))
			continue
		fi
		check "chart $scenario: $key" "${pair#*:}" "$out"
	done
done

# The chart derives the gateway's RBAC from k8s_attributes' extract.metadata
# and falls back to the processor's default list: both lists must agree.
if python3 - "$src" <<'PY'
import re, sys
src = sys.argv[1]
c = open(f"{src}/gateway/processors/k8s_attributes-config.c").read()
m = re.search(r'SR_FIELD_STRLIST\("metadata".*?\.def = ((?:\s*"[^"]*")+)', c, re.S)
gw = [x.strip() for x in "".join(re.findall(r'"([^"]*)"', m.group(1))).strip("[]").split(",")] if m else None
t = open(f"{src}/charts/stackrelay/templates/_helpers.tpl").read()
m2 = re.search(r'\$defaultMeta := list ((?:"[^"]*"\s*)+)', t)
chart = re.findall(r'"([^"]*)"', m2.group(1)) if m2 else None
if gw is None or chart is None or sorted(gw) != sorted(chart):
    print(f"gateway default: {gw}\nchart default:   {chart}")
    sys.exit(1)
PY
then
	echo "ok - chart RBAC: k8s_attributes default extract.metadata matches the gateway's"
	passed=$((passed + 1))
else
	echo "not ok - chart RBAC: k8s_attributes default extract.metadata differs (charts/stackrelay/templates/_helpers.tpl)"
	failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ $failed = 0 ]
