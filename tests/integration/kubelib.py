# SPDX-License-Identifier: Apache-2.0
"""The tests' one way to start tests/fakes/fake-kube-apiserver.js and point a
gateway at it.

    kube, kubeconfig = kubelib.start(src, d, state, token="sa-token")
    ... k8s_attributes: {auth_type: kubeConfig, kube_config_path: kubeconfig} ...
    kube.stdin.close()   # or terminate() it; the fake exits with its stdin

state is the fake's JSON state ({"pods": [...], "namespaces": [...]});
the fake's TLS files, the accepted token and the kubeconfig (server at
127.0.0.1:PORT, its CA, a tokenFile) are written into directory d.
"""
import json
import os
import subprocess


def start(src, d, state, token="sa-token", stderr=None):
    """Starts the fake API server on a port of its choosing; returns (process, kubeconfig path)."""
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "state.json"), "w") as f:
        json.dump(state, f)
    for name in ("accepted-token", "token"):
        with open(os.path.join(d, name), "w") as f:
            f.write(token + "\n")
    kube = subprocess.Popen(["node", os.path.join(src, "tests", "fakes", "fake-kube-apiserver.js"), "--dir", d,
                             "--state", os.path.join(d, "state.json")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=stderr if stderr is not None else subprocess.DEVNULL,
                            text=True)
    line = kube.stdout.readline()
    if not line.startswith("ready "):
        kube.kill()
        raise RuntimeError("the fake API server did not start: %r" % line)
    path = os.path.join(d, "kubeconfig")
    with open(path, "w") as f:
        f.write("""apiVersion: v1
kind: Config
current-context: test
clusters:
- name: fake
  cluster: {server: "https://127.0.0.1:%d", certificate-authority: ca.crt}
contexts:
- name: test
  context: {cluster: fake, user: sa}
users:
- name: sa
  user: {tokenFile: token}
""" % int(line.split()[1]))
    return kube, path
