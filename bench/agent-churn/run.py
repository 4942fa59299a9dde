#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/agent-churn: the agent's and the gateway's memory under process churn.

The agent runs as deployed (whole host, default config but --frequency,
sending to a stackrelay-gateway that exports to a local sink) while a loop
(tests/integration/churnlib.py, shared with the root suite's agent-churn
test) starts short-lived processes at --rate a second, round robin:
  - a fresh copy of /usr/bin/true whose GNU build ID is rewritten with random
    bytes (a new executable with a new build ID, as a CI node sees after
    every build), run once and deleted;
  - Debian's python3 running a short loop;
  - xz compressing a few KiB;
  - sh -c with a pipeline (fork + exec of coreutils);
  - every --node-every-th, node -e with a short loop (when node exists);
  - every --java-every-th, Debian's OpenJDK running a small class (when
    java and javac exist);
  - every --long-every-th, a python3 that lives --long-seconds, working a
    little every 0.1 s (the churn's long-lived processes);
  - every --unshare-every-th, the sh pipeline in a new mount namespace
    (unshare -m), as a container's process is.
Every --every seconds it records the agent's RSS by kind (anonymous, files,
BPF maps), its heap (stackrelay_agent_heap_bytes) and every cache's entries
(stackrelay_agent_cache_entries{cache} and _bytes{cache}), and the gateway's RSS, heap and what
holds it (its stores, symbol cache, shared lines, stack slabs, location
slots, from its /metrics). At the end it
prints the series and the growth over the second half of the run: the
least-squares line through that half's snapshots, from its start to its end
(RSS moves a few per cent from snapshot to snapshot with the window being
built and sent, so two single snapshots measure that noise, not a trend;
they are printed beside it). Target: agent RSS growth <= 1 %, peak <= 48
MiB; the gateway's growth <= 1 % with its stores at their bounds
(--gateway-stores sets bounds this host's churn reaches in the first half).

Usage (root, after building):
  bench/agent-churn/run.py --build build [--minutes 60] [--rate 300] [--every 10] [--hz 97]
                           [--gateway-stores stacks=24MiB,locations=8MiB,...]
                           [--java-every 100] [--long-every 100] [--long-seconds 20]
                           [--heaptrack FILE]
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "agent-overhead"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tests", "integration"))
from steady import free_port, rss_kib, start_gateway, wait_ready  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from procstats import proc_cpu_ns  # noqa: E402
import churnlib  # noqa: E402
import metricslib  # noqa: E402


# The gateway's memory by owner, from its /metrics: family -> label of the
# part (summed over the other labels; the slabs' resident pages), each in MiB.
GATEWAY_PARTS = (("stackrelay_gateway_store_bytes", "store"),
                 ("stackrelay_gateway_agent_dedupe_bytes", None),
                 ("stackrelay_gateway_heap_cache_bytes", "cache"),
                 ("stackrelay_gateway_symbolize_cache_bytes", None),
                 ("stackrelay_gateway_shared_lines_bytes", None),
                 ("stackrelay_gateway_stack_slab_bytes", None),
                 ("stackrelay_gateway_location_slot_bytes", None),
                 ("stackrelay_gateway_store_limit_bytes", "store"))


def gateway_parts(port):
    """The gateway's heap in use and what holds it: {"heap": MiB, part: MiB}."""
    parts = {}
    try:
        text = metricslib.scrape(port, timeout=5)
    except OSError:
        return parts
    for family, labels, value, _ in metricslib.samples(text):
        if family == "stackrelay_gateway_heap_bytes" and labels.get("state") == "in_use":
            parts["heap"] = value / 1048576.0
        # Not bytes: the agent receiver's remembered responses (their bytes are a part below).
        if family == "stackrelay_gateway_agent_dedupe_entries":
            parts["dedupe_entries"] = value
        for want, by in GATEWAY_PARTS:
            # The slabs' and slots' states: live, mapped, resident; what they hold in memory is resident.
            if family == want and labels.get("state", "resident") == "resident":
                name = family[len("stackrelay_gateway_"):-len("_bytes")].replace("store_limit", "limit")
                if by:
                    name += ":" + labels.get(by, "")
                parts[name] = parts.get(name, 0.0) + value / 1048576.0
    return parts


def snapshot(agent_pid, gw_pid, port, gw_port):
    rss, kinds = rss_kib(agent_pid)
    gw_rss, _ = rss_kib(gw_pid)
    caches, cache_mib, heap = {}, {}, 0
    try:
        text = metricslib.scrape(port, timeout=5)
        for family, labels, value, _ in metricslib.samples(text):
            if family == "stackrelay_agent_cache_entries":
                caches[labels["cache"]] = int(value)
            elif family == "stackrelay_agent_cache_bytes":
                cache_mib[labels["cache"]] = value / 1048576.0
            elif family == "stackrelay_agent_heap_bytes" and labels.get("state") == "in_use":
                heap = int(value)
    except OSError:
        pass
    return {"rss": rss / 1024.0, "anon": kinds["anonymous"] / 1024.0, "files": kinds["files"] / 1024.0,
            "bpf": kinds["bpf maps"] / 1024.0, "heap": heap / 1048576.0, "gw": gw_rss / 1024.0, "caches": caches,
            "cache_mib": cache_mib, "gw_parts": gateway_parts(gw_port)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--rate", type=float, default=300, help="processes started per second")
    ap.add_argument("--every", type=float, default=10, help="seconds between snapshots")
    ap.add_argument("--hz", type=int, default=97)
    ap.add_argument("--baseline", type=float, default=30,
                    help="seconds of the agent's CPU measured before the churn starts")
    ap.add_argument("--node-every", type=int, default=50)
    ap.add_argument("--unshare-every", type=int, default=10)
    ap.add_argument("--java-every", type=int, default=100, help="0: no Java processes")
    ap.add_argument("--long-every", type=int, default=100, help="0: no long-lived processes")
    ap.add_argument("--long-seconds", type=float, default=20, help="how long each long-lived process lives")
    ap.add_argument("--gateway-stores", default="", metavar="STORE=SIZE,...",
                    help="the gateway's receivers.agent.stores bounds (default: the gateway's own)")
    ap.add_argument("--heaptrack", default="", metavar="FILE",
                    help="run the gateway under heaptrack (Debian's package), recording to FILE.zst, for "
                         "bench/fleet/heap-owners.py; its RSS figures then include heaptrack's own")
    args = ap.parse_args()
    stores = {}
    for item in filter(None, args.gateway_stores.split(",")):
        name, eq, size = item.partition("=")
        if not eq or name not in ("executables", "kernels", "locations", "stacks", "functions"):
            raise SystemExit("--gateway-stores: %r is not STORE=SIZE with STORE one of executables, kernels, "
                             "locations, stacks, functions" % item)
        stores[name] = size
    if os.geteuid() != 0:
        raise SystemExit("run as root (the agent needs it)")
    args.build = os.path.abspath(args.build)
    tmp = tempfile.mkdtemp(prefix="sr-churn-")
    gw = sink = agent = None
    churn = churnlib.Churn(tmp, args.rate, node_every=args.node_every, unshare_every=args.unshare_every,
                           java_every=args.java_every, long_every=args.long_every, long_seconds=args.long_seconds)
    try:
        if args.heaptrack and not shutil.which("heaptrack"):
            raise SystemExit("--heaptrack: heaptrack is not installed (apt-get install heaptrack)")
        gw, sink, endpoint = start_gateway(args, tmp, stores,
                                           wrap=["heaptrack", "-o", args.heaptrack] if args.heaptrack else None)
        port = free_port()
        cfg = os.path.join(tmp, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("gateway:\n  endpoint: %s\ntelemetry:\n  metrics:\n    address: 127.0.0.1:%d\n" % (endpoint, port))
        agent = subprocess.Popen([os.path.join(args.build, "agent", "stackrelay-agent"), "--config", cfg,
                                  "--frequency", str(args.hz), "--log-level", "info"], stderr=subprocess.PIPE,
                                 text=True)
        if not wait_ready(agent, "msg=profiling ", timeout=60):
            raise SystemExit("agent did not start")
        # The agent's own CPU with no churn (the host's steady load at --hz),
        # so that what the churn adds can be told per process started.
        b0, bt0 = proc_cpu_ns(agent.pid), time.monotonic()
        time.sleep(args.baseline)
        base_rate = (proc_cpu_ns(agent.pid) - b0) / max(time.monotonic() - bt0, 1e-3)
        cpu0 = proc_cpu_ns(agent.pid)
        churn.start()
        start = time.monotonic()
        series = []
        while time.monotonic() - start < args.minutes * 60:
            time.sleep(args.every)
            s = snapshot(agent.pid, gw.gateway_pid, port, gw.metrics_port)
            s["t"] = time.monotonic() - start
            s["cpu"] = proc_cpu_ns(agent.pid) - cpu0
            s["started"] = churn.started_so_far
            # What the gateway holds beyond its definition stores (which are bounded): the rest of its memory.
            s["gw_rest"] = s["gw"] - sum(v for k, v in s["gw_parts"].items() if k.startswith("store:"))
            series.append(s)
            print("%6.0f s  agent RSS %6.1f MiB (anon %5.1f, files %5.1f, bpf %5.1f, heap %5.1f)  gateway %6.1f MiB  %s"
                  % (s["t"], s["rss"], s["anon"], s["files"], s["bpf"], s["heap"], s["gw"],
                     " ".join("%s=%d (%.2f MiB)" % (k, v, s["cache_mib"].get(k, 0.0))
                              for k, v in sorted(s["caches"].items()))), flush=True)
            print("        gateway MiB: %s" % " ".join("%s=%.2f" % kv for kv in sorted(s["gw_parts"].items())),
                  flush=True)
        churn.finish()
    finally:
        churn.stop.set()
        for p in (agent, gw, sink):
            if p and p.poll() is None:
                # Under heaptrack, the gateway stops and heaptrack then finishes its recording.
                wrapped = p is gw and gw.gateway_pid != gw.pid
                try:
                    os.kill(gw.gateway_pid if wrapped else p.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=300 if wrapped else 30)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    if len(series) < 4:
        return 1
    half = series[len(series) // 2]
    last = series[-1]
    secs = last["t"]
    second = series[len(series) // 2:]

    def growth(k):
        """The second half's trend: its least-squares line, end against start, in per cent of the start."""
        ys = [s[k] for s in second]
        xs = [s["t"] for s in second]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
        start = my + slope * (xs[0] - mx)
        return 100.0 * slope * (xs[-1] - xs[0]) / start if start else 0.0

    def snapshots(k):
        return 100.0 * (last[k] - half[k]) / half[k] if half[k] else 0.0
    print("\n%d processes started in %.0f s (%.0f a second), agent at %d Hz sending to a gateway" %
          (churn.started, secs, churn.started / secs, args.hz))
    print("by kind: %s" % " ".join("%s=%d" % kv for kv in sorted(churn.by_kind.items())))
    if churn.failed:
        print("exited non-zero, by kind: %s" % " ".join("%s=%d" % kv for kv in sorted(churn.failed.items())))
    extra = last["cpu"] - base_rate * secs  # what the churn added to the agent's threads
    print("agent threads' CPU: %.2f %% of a core before the churn, %.2f %% during it; %.0f us per process started"
          % (100.0 * base_rate / 1e9, 100.0 * last["cpu"] / 1e9 / secs,
             extra / 1e3 / max(last["started"], 1)))
    print("| | at half time | at the end | growth over the second half (trend) | (the two snapshots) "
          "| second half's range | peak |")
    print("|---|---|---|---|---|---|---|")
    for k, label in (("rss", "agent RSS, MiB"), ("anon", "agent anonymous, MiB"), ("heap", "agent heap in use, MiB"),
                     ("gw", "gateway RSS, MiB"), ("gw_rest", "gateway RSS beyond its stores, MiB")):
        print("| %s | %.1f | %.1f | **%+.2f %%** | %+.2f %% | %.1f–%.1f | %.1f |" % (
            label, half[k], last[k], growth(k), snapshots(k), min(s[k] for s in second),
            max(s[k] for s in second), max(s[k] for s in series)))
    for name in sorted(last["caches"]):
        print("| cache %s, entries | %d | %d | %+d | %d |" % (name, half["caches"].get(name, 0), last["caches"][name],
                                                             last["caches"][name] - half["caches"].get(name, 0),
                                                             max(s["caches"].get(name, 0) for s in series)))
    for name in sorted(last["cache_mib"]):
        print("| cache %s, MiB | %.2f | %.2f | %+.2f | %.2f |" % (
            name, half["cache_mib"].get(name, 0.0), last["cache_mib"][name],
            last["cache_mib"][name] - half["cache_mib"].get(name, 0.0),
            max(s["cache_mib"].get(name, 0.0) for s in series)))
    for name in sorted(n for n in last["gw_parts"] if n.startswith("limit:")):
        store = "store:" + name[len("limit:"):]
        at = sum(1 for s in second if s["gw_parts"].get(store, 0.0) >= 0.95 * s["gw_parts"][name] > 0)
        print("gateway store %s: bound %.1f MiB, at >= 95 %% of it in %d of the second half's %d snapshots" %
              (store[len("store:"):], last["gw_parts"][name], at, len(second)))
    for name in sorted(n for n in last["gw_parts"] if not n.startswith("limit:")):
        print("| gateway %s, %s | %.2f | %.2f | %+.2f | %.2f |" % (
            name, "entries" if name.endswith("_entries") else "MiB", half["gw_parts"].get(name, 0.0),
            last["gw_parts"][name],
            last["gw_parts"][name] - half["gw_parts"].get(name, 0.0),
            max(s["gw_parts"].get(name, 0.0) for s in series)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
