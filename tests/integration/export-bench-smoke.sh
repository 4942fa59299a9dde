#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Smoke test of bench/gateway-throughput/run.py (the end-to-end throughput
# bench): the saved agent recording replayed for 2 seconds through the real
# gateway, as agent pushes (symbolize + batch, warm and cold) and as the same
# profiles in OTLP requests (otlp receiver, OTLP/HTTP and OTLP/gRPC: --quick);
# each must export every sample it acknowledged, and no table may be uploaded twice.
# Speed is not asserted (bench/README.md); this only keeps the bench working.
set -euo pipefail

src=${SR_SOURCE_ROOT:?}
build=${SR_BUILD_ROOT:?}
if ! command -v node >/dev/null; then
	echo "node not found: cannot run the replay client" >&2
	exit 77
fi
exec python3 "$src/bench/gateway-throughput/run.py" --build "$build" \
	--recording "$src/bench/gateway-throughput/recording-sample.bin" \
	--seconds 2 --warmup 1 --agents 4 --inflight 2 --quick
