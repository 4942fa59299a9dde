#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End to end with real eBPF: a workload in a cgroup v2 path shaped like a
containerd pod container under the systemd driver
(kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/
cri-containerd-<64 hex>.scope), the real agent profiling that pod (cgroup
filter), the real gateway with k8s_attributes reading the fake API server
(tests/fakes/fake-kube-apiserver.js: TLS, bearer token, kubeconfig), which
knows a pod with that container ID in a Deployment, exporting to the fake
Pyroscope (tests/fakes/fake_pyroscope.py), through a relabel keep rule on
the container ID. The exported profile must carry
k8s.pod.name, k8s.namespace.name, k8s.deployment.name, k8s.container.name
and service.name inferred from the Deployment.

Needs root, BPF, cgroup v2, node and openssl; exits 77 otherwise. Removes
every cgroup and process it made.
"""
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelib  # noqa: E402

SKIP = 77
failed = 0


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


def check(ok, what):
    global failed
    print(("ok - " if ok else "not ok - ") + what)
    if not ok:
        failed += 1


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split(" ")[0] == "cgroup2":
                return left.split(" ")[4]
    return None


def wait_for(fn, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    raise RuntimeError("timed out waiting for " + what)


def main():
    if os.geteuid() != 0:
        skip("needs root (BPF, perf events, cgroups)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        skip("kernel without BTF")
    for tool in ("node", "openssl"):
        if not shutil.which(tool):
            skip(tool + " not installed")
    mnt = cgroup2_mount()
    if not mnt:
        skip("no cgroup v2 mount")
    agent, gateway = os.environ.get("SR_AGENT"), os.environ.get("SR_GATEWAY")
    src, build = os.environ.get("SR_SOURCE_ROOT"), os.environ.get("SR_BUILD_ROOT")
    if not all((agent, gateway, src, build)):
        skip("run through meson test (SR_AGENT, SR_GATEWAY, SR_SOURCE_ROOT, SR_BUILD_ROOT)")
    workload = os.path.join(build, "tests", "workloads", "alphabeta-fp")
    if not os.access(workload, os.X_OK):
        skip("workload not built: " + workload)

    tmp = tempfile.mkdtemp(prefix="sr-k8s-e2e-")
    pod_uid = str(uuid.uuid4())
    cid = secrets.token_hex(32)
    parts = ["kubepods.slice", "kubepods-besteffort.slice",
             "kubepods-besteffort-pod%s.slice" % pod_uid.replace("-", "_"), "cri-containerd-%s.scope" % cid]
    created, procs = [], []
    kube = pyro = gw = None
    try:
        path = mnt
        for p in parts:
            path = os.path.join(path, p)
            if not os.path.isdir(path):
                os.mkdir(path)
                created.append(path)
        wl = subprocess.Popen([workload, "12"], stdout=subprocess.DEVNULL)
        procs.append(wl)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(wl.pid))
        line = open("/proc/%d/cgroup" % wl.pid).read()
        check(cid in line and pod_uid.replace("-", "_") in line, "workload is in the pod container's cgroup")

        # The API server: a Deployment "checkout" -> ReplicaSet -> the pod with that container ID.
        rs = "checkout-7c9d8"
        state = {
            "namespaces": [{"metadata": {"name": "kube-system", "uid": "cluster-e2e"}},
                           {"metadata": {"name": "payments", "uid": "ns-payments"}}],
            "replicasets": [{"metadata": {"name": rs, "namespace": "payments", "uid": "rs-1", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "checkout", "uid": "dep-1", "controller": True}]}}],
            "pods": [{
                "metadata": {"name": rs + "-q8w2e", "namespace": "payments", "uid": pod_uid,
                             "labels": {"pod-template-hash": "7c9d8"},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                                  "uid": "rs-1", "controller": True}]},
                "spec": {"nodeName": os.uname().nodename,
                         "containers": [{"name": "server", "image": "registry.local/payments/checkout:4.2.0"}]},
                "status": {"phase": "Running", "containerStatuses": [
                    {"name": "server", "containerID": "containerd://" + cid, "ready": True, "restartCount": 0}]},
            }],
        }
        kube, kubeconfig = kubelib.start(src, os.path.join(tmp, "kube"), state, token="e2e-token")

        port_file = os.path.join(tmp, "pyroscope.port")
        pyro = subprocess.Popen([sys.executable, os.path.join(src, "tests/fakes/fake_pyroscope.py"),
                                 "--port-file", port_file, "--lifetime", "140"])
        pport = wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(), 10, "fake pyroscope")

        with open(os.path.join(tmp, "gateway.yaml"), "w") as f:
            f.write("""receivers:
  agent:
    endpoint: 127.0.0.1:0
processors:
  k8s_attributes:
    auth_type: kubeConfig
    kube_config_path: %s
    wait_for_metadata: true
  relabel:
    rules:
      # Belt and braces: the agent's cgroup filter already limits profiling to the pod.
      - action: keep
        source_labels: [container.id]
        regex: "%s"
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:%s
    compression: none
service:
  pipelines:
    profiles: {receivers: [agent], processors: [k8s_attributes, relabel], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
  shutdown_timeout: 10s
""" % (kubeconfig, cid, pport))
        gw_log = open(os.path.join(tmp, "gateway.log"), "w+")
        gw = subprocess.Popen([gateway, "--config", os.path.join(tmp, "gateway.yaml")], stdout=gw_log, stderr=gw_log)

        def gw_address():
            gw_log.flush()
            text = open(gw_log.name).read()
            a = re.search(r"listening for agents.* address=(\S+)", text)
            return a.group(1) if a and "msg=running" in text else None
        address = wait_for(gw_address, 15, "the gateway to listen")

        with open(os.path.join(tmp, "agent.yaml"), "w") as f:
            # The agent reads /sys/fs/cgroup/<path> as a path of the cgroup v2 hierarchy (also on hybrid hosts).
            f.write("gateway:\n  endpoint: http://%s\n  flush_timeout: 10s\nprofiling:\n  frequency: 99\n"
                    "  cgroups: [\"/sys/fs/cgroup/%s\"]\n" % (address, "/".join(parts[:-1])))
        a = subprocess.run([agent, "--config", os.path.join(tmp, "agent.yaml"), "--duration", "4"],
                           capture_output=True, text=True, timeout=90)
        check(a.returncode == 0, "agent exits 0 after --duration (rc=%d)" % a.returncode)
        if a.returncode != 0:
            print(a.stderr[-3000:])
        me = re.search(r'msg="profiling stopped" samples_taken=(\d+) samples_exported=(\d+)', a.stderr)
        exported = int(me.group(2)) if me else 0
        check(exported >= 20, "the agent exported %d samples of the pod" % exported)
        if exported <= 50:
            print(a.stderr[-3000:])
            gw_log.flush()
            print("# gateway log:\n" + open(gw_log.name).read()[-3000:])

        def stats():
            with urllib.request.urlopen("http://127.0.0.1:%s/stats" % pport, timeout=5) as r:
                return json.load(r)
        # Every sample the agent exported went through the gateway: none lost, none unlabelled.
        st = wait_for(lambda: (lambda s: s if s["accepted_samples"] >= exported > 0 else None)(stats()), 30,
                      "every exported sample at the fake Pyroscope")
        check(st["accepted_samples"] == exported, "Pyroscope got exactly the %d samples the agent exported"
              % st["accepted_samples"])
        services = {k.split("|")[0] for k in st["by_key"]}
        check(services == {"checkout"}, "service.name inferred from the Deployment: %s" % sorted(services))
        res = [r["attributes"] for r in st["last_shapes"]["resources"] if r["attributes"].get("container.id") == cid]
        check(bool(res), "the exported resource carries the container ID")
        if res:
            r = res[0]
            check(r.get("k8s.pod.name") == rs + "-q8w2e", "k8s.pod.name = %s" % r.get("k8s.pod.name"))
            check(r.get("k8s.namespace.name") == "payments", "k8s.namespace.name = %s" % r.get("k8s.namespace.name"))
            check(r.get("k8s.deployment.name") == "checkout", "k8s.deployment.name = %s" % r.get("k8s.deployment.name"))
            check(r.get("k8s.container.name") == "server", "k8s.container.name = %s" % r.get("k8s.container.name"))
            check(r.get("k8s.pod.uid") == pod_uid, "k8s.pod.uid from the agent's cgroup parse")
            check(r.get("service.name") == "checkout", "service.name = %s" % r.get("service.name"))
        gw.send_signal(signal.SIGTERM)
        check(gw.wait(timeout=30) == 0, "gateway exits 0 on SIGTERM")
        gw = None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        if gw and gw.poll() is None:
            gw.kill()
            gw.wait()
        if kube:
            kube.stdin.close()
            kube.wait(timeout=10)
        if pyro:
            pyro.terminate()
            pyro.wait(timeout=10)
        for path in reversed(created):
            # A killed process leaves its cgroup a moment later: retry briefly.
            for attempt in range(50):
                try:
                    os.rmdir(path)
                    break
                except OSError as e:
                    if attempt == 49:
                        print("cleanup: cannot remove %s: %s" % (path, e))
                    time.sleep(0.1)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
