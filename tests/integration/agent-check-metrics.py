#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""--check preflight and the Prometheus endpoint of a profiling agent.

  - as root, --check passes and exits 0;
  - without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (bounding set dropped with
    setpriv), --check names what is missing, how to fix it, and exits 1;
  - telemetry.metrics.address serves /metrics in the Prometheus text format
    with the self-metrics (samples, filters, losses per CPU, caches, CPU time,
    RSS), consistent with what the agent logs at exit; other paths are 404.
"""
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import agentlib  # noqa: E402
import metricslib  # noqa: E402




def main():
    agentlib.require_root_bpf()
    env = agentlib.Env()
    c = agentlib.Checks()
    try:
        r = subprocess.run([env.agent, "--check"], capture_output=True, text=True, timeout=60)
        print(r.stdout)
        c.check(r.returncode == 0 and "all checks passed" in r.stdout, "--check as root passes (rc=%d)" % r.returncode)
        c.check("BPF program loads" in r.stdout, "--check loads and attaches the real program")

        if shutil.which("setpriv"):
            r = subprocess.run(["setpriv", "--bounding-set=-bpf,-perfmon,-sys_admin", "--", env.agent, "--check"],
                               capture_output=True, text=True, timeout=60)
            print(r.stdout)
            c.check(r.returncode == 1, "--check without CAP_BPF/PERFMON/SYS_ADMIN exits 1 (rc=%d)" % r.returncode)
            c.check("[FAIL] missing CAP_BPF/CAP_PERFMON" in r.stdout and "fix: run as root, or grant CAP_BPF" in r.stdout,
                    "--check names the missing capabilities and the fix")

        if shutil.which("unshare"):
            r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", env.agent, "--check"],
                               capture_output=True, text=True, timeout=60)
            c.check(r.returncode == 1 and "child PID namespace" in r.stdout and "hostPID: true" in r.stdout,
                    "--check in a child PID namespace fails and says to use the host's (rc=%d)" % r.returncode)

        port = free_port()
        cfg = os.path.join(env.tmp, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("gateway:\n  flush_timeout: 1s\nprofiling:\n  frequency: 99\n"
                    "telemetry:\n  metrics:\n    address: 127.0.0.1:%d\n" % port)
        work, _ = agentlib.start([env.workload("alphabeta-fp"), "30"])
        agent = subprocess.Popen([env.agent, "--config", cfg, "--duration", "30", "--output",
                                  os.path.join(env.tmp, "out.pb")], stderr=subprocess.PIPE, text=True)
        # Scrape until the agent has drained samples and tracks the workload
        # (at start-up it builds unwind tables for every process first, which
        # takes seconds under a sanitizer on a loaded machine), bounded.
        text = None
        deadline = time.time() + 25.0
        while time.time() < deadline and agent.poll() is None:
            time.sleep(0.5)
            try:
                text = metricslib.scrape(port, timeout=5)
            except (urllib.error.URLError, ConnectionError):
                continue
            m = metricslib.parse(text)
            if m.get("stackrelay_agent_samples_total", 0) > 0 and m.get("stackrelay_agent_processes", 0) >= 1:
                break
        status = None
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=5)
        except urllib.error.HTTPError as e:
            status = e.code
        except urllib.error.URLError:
            pass
        agent.send_signal(signal.SIGTERM)
        stderr = agent.communicate(timeout=60)[1]
        work.kill()
        work.wait()
        sys.stderr.write(stderr)
        c.check(agent.returncode == 0, "agent with metrics exits 0")
        c.check(text is not None, "GET /metrics answered")
        if text:
            m = metricslib.parse(text)
            for name in ("stackrelay_agent_samples_total", 'stackrelay_agent_samples_filtered_total{filter="idle"}',
                         'stackrelay_agent_samples_lost_total{cpu="0"}', "stackrelay_agent_processes",
                         "stackrelay_agent_store_stacks", "stackrelay_agent_executables_cached",
                         'stackrelay_agent_processes_retired_total{reason="exited"}',
                         'stackrelay_agent_task_events_total{type="exit"}',
                         "stackrelay_agent_store_executables_freed_total",
                         "process_cpu_seconds_total", "process_resident_memory_bytes"):
                c.check(name in m, "metric %s present" % name)
            c.check(m.get("stackrelay_agent_samples_total", 0) > 0, "samples_total > 0")
            rss = m.get("process_resident_memory_bytes", 0)
            if agentlib.sanitized(env.agent):
                # ASan's shadow memory and its quarantine of freed blocks (the table
                # builder frees megabytes) are not the agent's memory; the normal build
                # checks the bound.
                c.check(rss > 0, "agent RSS %.1f MiB (bound not checked under AddressSanitizer)" % (rss / 2 ** 20))
            else:
                c.check(0 < rss < 32 * 2 ** 20, "agent RSS %.1f MiB (< 32 MiB)" % (rss / 2 ** 20))
            # Memory itemized: resident pages by kind add up to the RSS; the ring
            # buffer's kernel memory and its pages mapped twice are in the figures.
            kinds = [m.get('stackrelay_agent_resident_bytes{kind="%s"}' % k) for k in ("bpf_maps", "anonymous", "files")]
            c.check(None not in kinds and abs(sum(kinds) - rss) <= 0.25 * rss,
                    "resident bytes by kind %s add up to the RSS %.1f MiB" %
                    (["%.1f MiB" % (k / 2 ** 20) for k in kinds if k is not None], rss / 2 ** 20))
            ring = int((agentlib.logfmt_fields(stderr, "profiling") or {}).get("ring_buffer_bytes", 0))
            events = m.get('stackrelay_agent_bpf_map_bytes{map="events"}', 0)
            c.check(ring > 0 and events >= ring and kinds[0] is not None and kinds[0] >= 2 * ring,
                    "ring buffer of %d KiB: %d KiB of kernel memory, %d KiB of the agent's resident BPF map pages "
                    "(mapped twice)" % (ring // 1024, events // 1024, (kinds[0] or 0) // 1024))
            c.check(m.get("stackrelay_agent_processes", 0) >= 1, "processes tracked >= 1")
            info = [k for k in m if k.startswith("stackrelay_build_info{")]
            c.check(len(info) == 1 and 'agent_protocol="stackrelay.v1"' in info[0] and
                    'otlp_profiles="1.9,1.10"' in info[0] and m[info[0]] == 1,
                    "stackrelay_build_info names the version, commit and protocols (%s)" % info)
        c.check(status == 404, "GET / is 404 (got %s)" % status)
        return c.finish()
    finally:
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
