#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The CI version of the fleet soak (bench/fleet/README.md): 3 minutes,
# 200 simulated 16-CPU nodes at 19 Hz against 2 gateway replicas behind
# HAProxy, with a replica SIGKILLed and restarted and the backend answering
# 503 + Retry-After for a while. soak.js --check 1 fails the test when RSS
# does not plateau or passes its limit, a store exceeds its limit or never
# evicts, or a sample taken is neither delivered nor explained.
# SR_FLEET_NODES overrides the node count (a slower machine). Every store
# must evict for the check; the executables store bounds only the
# executables no stored location names (old versions whose stacks and
# locations were all evicted), so images roll out every 30 s and the stacks
# (32 MiB) and locations (4 MiB) stores are small enough that old versions
# leave them within the 3 minutes; the executables store is at its minimum,
# 64 KiB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${SR_BUILD_ROOT:-$here/../../build}
if [ -n "${SR_SANITIZE:-}" ] && [ "${SR_SANITIZE}" != none ]; then
	echo "SKIP: sanitizer build (${SR_SANITIZE}): the soak's load does not fit its slowdown"
	exit 77
fi
for tool in node haproxy openssl; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/install-deps)"; exit 77; }
done
exec nice node "$here/soak.js" --build "$build" --minutes 3 --nodes "${SR_FLEET_NODES:-200}" --sim-procs 2 \
	--pod-lifetime 120 --deploy-every 30 --stores-mib 16 --executables-kib 64 --locations-mib 4 --faults kill,503 --check 1 --json "${SR_FLEET_JSON:-/dev/null}"
