#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Chart tests without a cluster or Helm (tests/chart/README.md):
#   1. builds tools/chart-render (Go text/template + sprig, as Helm renders)
#      and runs its go tests;
#   2. renders charts/stackrelay with its default values and with every
#      charts/stackrelay/ci/*-values.yaml, as an upgrade of a release whose
#      generated Secrets are tests/chart/existing-objects.yaml, and compares
#      manifests and NOTES with the golden files in tests/chart/golden/;
#      checks what a first install generates (check-generated.mjs);
#   3. validates every rendered object against the Kubernetes schemas
#      (tests/chart/validate.mjs); checks that the alert rules and dashboards
#      are PromQL naming metrics the gateway and agent expose
#      (tests/chart/check-monitoring.mjs);
#   4. renders every tests/chart/invalid/*.yaml and expects the error its
#      first line names ("# expect: TEXT");
#   5. checks that docs/install-kubernetes.md documents every value, and
#      that charts/stackrelay/README.md is the one chart-readme.mjs generates
#      from Chart.yaml and values.yaml.
#
#   tests/chart/test-chart.sh            run (meson test -C BUILD --suite ship)
#   tests/chart/test-chart.sh --update   rewrite the golden files and the
#                                        chart README after an intended chart
#                                        change; review the diff
set -euo pipefail

src=${SR_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${SR_BUILD_ROOT:-$src/build}
chart=$src/charts/stackrelay
here=$src/tests/chart
golden=$here/golden
update=0
[ "${1:-}" = "--update" ] && update=1

# Missing tools are a skip on a developer machine and a failure in CI, where
# scripts/install-deps has installed them.
missing() {
	if [ -n "${CI:-}" ]; then
		echo "test-chart: $1 (scripts/install-deps installs it)" >&2
		exit 1
	fi
	echo "test-chart: SKIP: $1; run scripts/install-deps" >&2
	exit 77
}
command -v go >/dev/null || missing "go is not installed (Debian golang-go)"
[ -d /usr/share/gocode/src/github.com/Masterminds/sprig ] ||
	missing "sprig is not installed (Debian golang-github-masterminds-sprig-dev)"
[ -d /usr/share/gocode/src/github.com/xeipuuv/gojsonschema ] ||
	missing "gojsonschema is not installed (Debian golang-github-xeipuuv-gojsonschema-dev)"
command -v node >/dev/null || missing "node is not installed"
for package in kubernetes-models @prometheus-io/lezer-promql; do
	[ -d "$here/node_modules/$package" ] || missing "npm packages of tests/chart are not installed"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/sr-chart.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Offline build against Debian's Go sources: GOPATH mode resolves sprig's
# semver/v3 import by Go's minimal module compatibility.
renderer=$build/tools/chart-render/chart-render
mkdir -p "$(dirname "$renderer")"
(cd "$src/tools/chart-render" &&
	GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= GOPROXY=off \
	GOCACHE="$build/tools/chart-render/go-cache" go build -o "$renderer" .)

passed=0
failed=0
pass() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "not ok - $1"; failed=$((failed + 1)); }

# The renderer's own tests: Helm's value, function and YAML behaviours.
if (cd "$src/tools/chart-render" &&
	GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= GOPROXY=off \
	GOCACHE="$build/tools/chart-render/go-cache" go test . >"$work/gotest.out" 2>&1); then
	pass "tools/chart-render: go test"
else
	fail "tools/chart-render: go test:"
	sed 's/^/    /' "$work/gotest.out"
fi
if [ -z "$(gofmt -l "$src/tools/chart-render")" ]; then
	pass "tools/chart-render: gofmt"
else
	fail "tools/chart-render: not gofmt-formatted: $(gofmt -l "$src/tools/chart-render")"
fi

# compare NAME GOLDEN ACTUAL
compare() {
	if [ $update = 1 ]; then
		mkdir -p "$golden"
		cp "$3" "$2"
		pass "$1 (golden updated)"
	elif [ ! -f "$2" ]; then
		fail "$1: no golden file $2 (run tests/chart/test-chart.sh --update)"
	elif diff -u "$2" "$3" >"$work/diff"; then
		pass "$1"
	else
		fail "$1: differs from ${2#"$src"/}:"
		head -n 80 "$work/diff" | sed 's/^/    /'
	fi
}

# The default values on their own must fail with the message that tells
# what to set: there is no sensible default for where Pyroscope is.
if "$renderer" "$chart" >/dev/null 2>"$work/default.err"; then
	fail "default values: rendered, but pyroscope.endpoint should be required"
elif grep -qF "pyroscope.endpoint is required (e.g. http://pyroscope.pyroscope.svc:4040)" "$work/default.err"; then
	pass "default values: pyroscope.endpoint is required"
else
	fail "default values: wrong error: $(cat "$work/default.err")"
fi

rendered=()
for values in "$chart"/ci/*-values.yaml; do
	name=$(basename "$values" -values.yaml)
	if ! "$renderer" -f "$values" --namespace observability --lookup "$here/existing-objects.yaml" "$chart" \
		>"$work/$name.yaml" 2>"$work/$name.err"; then
		fail "$name: render failed: $(cat "$work/$name.err")"
		continue
	fi
	"$renderer" -f "$values" --namespace observability --lookup "$here/existing-objects.yaml" --notes "$chart" |
		sed -n '/^NOTES:$/,$p' >"$work/$name.notes.txt"
	compare "$name: manifests" "$golden/$name.yaml" "$work/$name.yaml"
	compare "$name: NOTES.txt" "$golden/$name.notes.txt" "$work/$name.notes.txt"
	rendered+=("$work/$name.yaml")
done

if [ ${#rendered[@]} -gt 0 ]; then
	if node "$here/validate.mjs" "${rendered[@]}" >"$work/validate.out" 2>&1; then
		pass "kubernetes schemas: $(tail -n 1 "$work/validate.out")"
	else
		fail "kubernetes schemas:"
		sed 's/^/    /' "$work/validate.out"
	fi
	if node "$here/check-monitoring.mjs" "$src" "${rendered[@]}" >"$work/monitoring.out" 2>&1; then
		pass "alerts and dashboards: $(tail -n 1 "$work/monitoring.out")"
	else
		fail "alerts and dashboards:"
		sed 's/^/    /' "$work/monitoring.out"
	fi
fi

# A first install (lookup finds nothing) generates the bearer token and the
# TLS CA and certificates; two installs must not share them.
fresh=$chart/ci/generated-tls-values.yaml
if "$renderer" -f "$fresh" --namespace observability "$chart" >"$work/fresh1.yaml" 2>"$work/fresh.err" &&
	"$renderer" -f "$fresh" --namespace observability "$chart" >"$work/fresh2.yaml" 2>>"$work/fresh.err" &&
	node "$here/check-generated.mjs" "$work/fresh1.yaml" "$work/fresh2.yaml" >"$work/fresh.out" 2>&1; then
	pass "first install: $(tail -n 1 "$work/fresh.out")"
else
	fail "first install: generated Secrets:"
	sed 's/^/    /' "$work/fresh.err" "$work/fresh.out" 2>/dev/null
fi
# An upgrade keeps them: the rendered Secrets are the looked-up ones.
if "$renderer" -f "$fresh" --namespace observability --lookup "$here/existing-objects.yaml" "$chart" \
	>"$work/upgrade.yaml" 2>"$work/upgrade.err" &&
	node "$here/check-generated.mjs" --kept "$here/existing-objects.yaml" "$work/upgrade.yaml" >"$work/upgrade.out" 2>&1; then
	pass "upgrade: $(tail -n 1 "$work/upgrade.out")"
else
	fail "upgrade: generated Secrets not kept:"
	sed 's/^/    /' "$work/upgrade.err" "$work/upgrade.out"
fi

for values in "$here"/invalid/*.yaml; do
	name=invalid/$(basename "$values" .yaml)
	expect=$(sed -n '1s/^# expect: //p' "$values")
	if [ -z "$expect" ]; then
		fail "$name: first line must be '# expect: TEXT'"
	elif "$renderer" -f "$values" "$chart" >/dev/null 2>"$work/err"; then
		fail "$name: rendered, expected an error containing: $expect"
	elif grep -qF -- "$expect" "$work/err"; then
		pass "$name: $expect"
	else
		fail "$name: wrong error; expected '$expect', got: $(cat "$work/err")"
	fi
done

# Every value is documented, so the docs cannot fall behind the chart.
undocumented=()
while read -r key; do
	grep -qF "\`$key\`" "$src/docs/install-kubernetes.md" || undocumented+=("$key")
done < <(node "$here/values-keys.mjs" "$chart/values.yaml")
if [ ${#undocumented[@]} -eq 0 ]; then
	pass "every value is documented in docs/install-kubernetes.md"
else
	fail "values missing from docs/install-kubernetes.md: ${undocumented[*]}"
fi

# The chart's README (helm show readme) follows values.yaml.
if [ $update = 1 ]; then
	if node "$here/chart-readme.mjs" --update "$chart" "$src/docs/install-kubernetes.md" >"$work/readme.out" 2>&1; then
		pass "charts/stackrelay/README.md (updated)"
	else
		fail "charts/stackrelay/README.md: $(cat "$work/readme.out")"
	fi
elif node "$here/chart-readme.mjs" --check "$chart" "$src/docs/install-kubernetes.md" >"$work/readme.out" 2>&1; then
	pass "$(cat "$work/readme.out")"
else
	fail "$(cat "$work/readme.out")"
fi

echo "$passed passed, $failed failed"
[ $failed = 0 ]
