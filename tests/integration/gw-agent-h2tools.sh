#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Interop of the agent receiver with Debian's nghttp2-client tools (an
# independent HTTP/2 implementation): `nghttp` posts a recorded PushRequest
# over h2c and over mTLS; `h2load` with 100 concurrent connections must
# complete with no failed or errored request (its req/s is printed, not
# asserted). The gateway's accounting must match what h2load sent.
set -euo pipefail

for t in nghttp h2load openssl node; do
	command -v "$t" >/dev/null || { echo "SKIP: $t not installed (Debian nghttp2-client, openssl, nodejs)"; exit 77; }
done
: "${SR_GATEWAY:?}" "${SR_SOURCE_ROOT:?}"
here="$SR_SOURCE_ROOT/tests/integration"
dir=$(mktemp -d /tmp/sr-gw-h2tools-XXXXXX)
gw_pid=""
sink_pid=""
cleanup() {
	[ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null && wait "$gw_pid" 2>/dev/null || true
	[ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- gateway log"; tail -30 "$dir/gw.log" || true; exit 1; }

# A recorded request: 16 stacks with their definitions, 16 samples of count 3 (48 CPU samples).
# No instance_id, so every copy h2load sends is processed (no de-duplication).
node -e '
const L = require(process.argv[1]);
const w = L.makeWorld(16);
const body = L.encodePushRequest({ stacks: w.stacks, executables: w.exes,
  samples: w.stacks.map((s, i) => ({ stackId: s.id, pid: 1, tid: i, count: 3, processName: "bench" })) });
require("fs").writeFileSync(process.argv[2], body);' "$here/gw-lib.js" "$dir/req.bin"

# Certificates for the mTLS part, made by the same helper as the Node tests.
node -e 'require(process.argv[1]).makeCerts(process.argv[2])' "$here/gw-lib.js" "$dir"

# The exporter's backend: a sink that answers 200 to everything.
python3 - "$dir/sink.port" <<'EOF' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
EOF
sink_pid=$!
for _ in $(seq 50); do [ -s "$dir/sink.port" ] && break; sleep 0.1; done
sink_port=$(cat "$dir/sink.port")

start_gateway() { # $1 = extra receiver YAML (indented 4)
	cat >"$dir/gw.yaml" <<EOF
receivers:
  agent:
    endpoint: 127.0.0.1:0
$1
exporters:
  otlp_http: {endpoint: "http://127.0.0.1:$sink_port", compression: none}
service:
  pipelines:
    profiles: {receivers: [agent], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
EOF
	"$SR_GATEWAY" --config "$dir/gw.yaml" 2>"$dir/gw.log" &
	gw_pid=$!
	for _ in $(seq 100); do grep -q 'msg=running' "$dir/gw.log" && break; sleep 0.1; done
	agent_addr=$(sed -n 's/.*listening for agents.* address=\([^ ]*\).*/\1/p' "$dir/gw.log")
	metrics_addr=$(sed -n 's/.*telemetry server listening" address=\([^ ]*\).*/\1/p' "$dir/gw.log")
	[ -n "$agent_addr" ] && [ -n "$metrics_addr" ] || fail "gateway did not start"
}
stop_gateway() {
	kill -TERM "$gw_pid"
	wait "$gw_pid" || fail "gateway exited with $?"
	gw_pid=""
}
metric() { # name label-substring
	python3 -c 'import sys,urllib.request
t=urllib.request.urlopen("http://"+sys.argv[1]+"/metrics",timeout=5).read().decode()
print(int(sum(float(l.split()[-1]) for l in t.splitlines() if l.startswith(sys.argv[2]+"{") and sys.argv[3] in l)))' \
		"$metrics_addr" "$1" "$2"
}

url_path=/stackrelay.v1.Ingest/Push
ctype='content-type: application/x-protobuf'

# --- h2c: nghttp and h2load ---
start_gateway ""
nghttp -v -d "$dir/req.bin" -H "$ctype" "http://$agent_addr$url_path" >"$dir/nghttp.out" 2>&1 || fail "nghttp: $(tail -5 "$dir/nghttp.out")"
grep -q ':status: 200' "$dir/nghttp.out" || fail "nghttp h2c: no 200: $(grep ':status' "$dir/nghttp.out")"
echo "ok - nghttp posts a recorded PushRequest over h2c"

n=20000
h2load -n $n -c 100 -m 4 -d "$dir/req.bin" -H "$ctype" "http://$agent_addr$url_path" >"$dir/h2load.out" 2>&1 || fail "h2load: $(tail -5 "$dir/h2load.out")"
grep -E '^(finished in|requests:|status codes:)' "$dir/h2load.out"
grep -qE "^requests: $n total, $n started, $n done, $n succeeded, 0 failed, 0 errored" "$dir/h2load.out" ||
	fail "h2load had failures: $(grep '^requests:' "$dir/h2load.out")"
grep -qE "^status codes: $n 2xx" "$dir/h2load.out" || fail "h2load: not all 2xx: $(grep '^status codes' "$dir/h2load.out")"
echo "ok - h2load: $n requests on 100 connections, no errors"

expect=$(((n + 1) * 48))
got=$(metric stackrelay_gateway_samples_accepted_total 'component="agent"')
[ "$got" = "$expect" ] || fail "accepted $got CPU samples, expected $expect"
for _ in $(seq 100); do
	exported=$(metric stackrelay_gateway_samples_exported_total 'component="otlp_http"')
	[ "$exported" = "$expect" ] && break
	sleep 0.1
done
[ "$exported" = "$expect" ] || fail "exported $exported CPU samples, expected $expect"
echo "ok - accounting: $expect CPU samples accepted and exported"
stop_gateway

# --- mTLS with nghttp ---
start_gateway "    tls: {cert_file: $dir/server.crt, key_file: $dir/server.key, client_ca_file: $dir/ca.crt}"
nghttp -v -d "$dir/req.bin" -H "$ctype" --cert "$dir/client.crt" --key "$dir/client.key" \
	"https://$agent_addr$url_path" >"$dir/nghttp.out" 2>&1 || fail "nghttp mTLS: $(tail -5 "$dir/nghttp.out")"
grep -q ':status: 200' "$dir/nghttp.out" || fail "nghttp mTLS: no 200"
echo "ok - nghttp posts over mTLS"
if nghttp -d "$dir/req.bin" -H "$ctype" --cert "$dir/rogue-client.crt" --key "$dir/rogue-client.key" \
	"https://$agent_addr$url_path" >"$dir/nghttp.out" 2>&1 && grep -q ':status: 200' "$dir/nghttp.out"; then
	fail "a client certificate from another CA was accepted"
fi
echo "ok - nghttp with a certificate from another CA is refused"
stop_gateway
