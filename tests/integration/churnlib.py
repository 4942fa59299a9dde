# SPDX-License-Identifier: Apache-2.0
"""Process churn for the agent's memory checks: the loop of bench/agent-churn/run.py
and of the root suite's agent-churn test (one copy, here).

    churn = churnlib.Churn(tmp, rate=100)
    churn.start()          # a thread starting processes at `rate` a second
    ...
    churn.finish()         # stops starting, waits for the live ones, returns how many ran

Processes are started round robin:
  - a fresh copy of /usr/bin/true whose GNU build ID is rewritten with random
    bytes (a new executable with a new build ID, as a CI node sees after every
    build), run once and deleted;
  - Debian's python3 running a short loop;
  - xz -1 compressing a few KiB (-9 reserves 674 MiB a process: dozens at
    once were OOM-killed);
  - sh -c with a pipeline (fork + exec of coreutils);
  - every node_every-th, node -e with a short loop (when node exists);
  - every java_every-th (0: none), Debian's OpenJDK running a small class
    compiled at the start (when java and javac exist);
  - every long_every-th (0: none), a python3 that lives long_seconds,
    waking every 0.1 s for a little work (so it is sampled all its life);
  - every unshare_every-th, the sh pipeline in a new mount namespace
    (unshare -m), as a container's process is.
No more than 64 run at once: on a loaded host the loop falls behind the rate
rather than piling processes up. `failed` counts those that exited non-zero, by kind.
"""
import os
import random
import shutil
import subprocess
import threading
import time

MAX_LIVE = 64

# A short Java run: the interpreter, then C1 code for the loop.
JAVA_SRC = """public class Churn {
    static long step(long s, int i) { return s * 31 + i; }
    public static void main(String[] a) {
        long s = 0;
        for (int i = 0; i < 60000000; i++) s = step(s, i);
        if (s == 42) System.out.println(s);
    }
}
"""

# A long-lived process: a little work every 0.1 s for argv[1] seconds.
LONG_SRC = """import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    sum(range(20000))
    time.sleep(0.1)
"""


def build_id_offset(path):
    """(file offset, length) of the GNU build ID's bytes in an ELF file (its note's descriptor)."""
    out = subprocess.run(["readelf", "-W", "-S", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 5 and f[1] == ".note.gnu.build-id":
            off = int(f[4], 16)
            # Elf64_Nhdr: namesz, descsz, type (4 bytes each), then "GNU\0", then the ID.
            return off + 16, 20
    raise SystemExit("%s has no .note.gnu.build-id" % path)


class Churn:
    def __init__(self, tmp, rate, node_every=50, unshare_every=10, preexec=None, java_every=0, long_every=0,
                 long_seconds=20):
        self.tmp = tmp
        self.preexec = preexec  # run in each child before exec (e.g. to enter a cgroup)
        self.rate = rate
        self.node_every = node_every
        self.unshare_every = unshare_every
        self.java_every = java_every
        self.long_every = long_every
        self.long_seconds = long_seconds
        self.started = 0
        self.started_so_far = 0  # read by a sampling loop while run() goes on
        self.by_kind = {}
        self.failed = {}
        self.stop = threading.Event()
        self.thread = None
        self.true_path = "/usr/bin/true"
        self.id_off, self.id_len = build_id_offset(self.true_path)
        self.true_bytes = open(self.true_path, "rb").read()
        self.node = shutil.which("node")
        self.kinds = ["copy", "python", "xz", "sh"]
        self.java = shutil.which("java") if java_every and shutil.which("javac") else None
        if self.java:
            with open(os.path.join(tmp, "Churn.java"), "w") as f:
                f.write(JAVA_SRC)
            subprocess.run(["javac", "-d", tmp, os.path.join(tmp, "Churn.java")], check=True)

    def fresh_true(self, n):
        path = os.path.join(self.tmp, "true-%d" % n)
        data = bytearray(self.true_bytes)
        data[self.id_off:self.id_off + self.id_len] = random.randbytes(self.id_len)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o755)
        return path

    def kind_of(self, n):
        if self.node and n % self.node_every == 0:
            return "node"
        if self.java and n % self.java_every == 1:
            return "java"
        if self.long_every and n % self.long_every == 2:
            return "long"
        if n % self.unshare_every == 0:
            return "unshare"
        return self.kinds[n % len(self.kinds)]

    def one(self, n):
        kind = self.kind_of(n)
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        cleanup = None
        if kind == "node":
            cmd = [self.node, "-e", "let s=0; for (let i=0;i<2e5;i++) s+=i"]
        elif kind == "java":
            cmd = [self.java, "-Xmx64m", "-cp", self.tmp, "Churn"]
        elif kind == "long":
            cmd = ["python3", "-c", LONG_SRC, str(self.long_seconds)]
        elif kind == "unshare":
            cmd = ["unshare", "-m", "sh", "-c", "echo x | cat | wc -c > /dev/null"]
        elif kind == "copy":
            cleanup = self.fresh_true(n)
            cmd = [cleanup]
        elif kind == "python":
            cmd = ["python3", "-c", "sum(range(100000))"]
        elif kind == "xz":
            cmd = ["sh", "-c", "head -c 8192 /usr/bin/true | xz -1 > /dev/null"]
        else:
            cmd = ["sh", "-c", "ls /usr/bin | sort | head -1 > /dev/null"]
        p = subprocess.Popen(cmd, preexec_fn=self.preexec)
        p.kind = kind
        p.cleanup = cleanup
        return p

    def reap(self, p):
        if p.returncode != 0:
            self.failed[p.kind] = self.failed.get(p.kind, 0) + 1
        if p.cleanup:
            os.unlink(p.cleanup)

    def run(self):
        live = []
        interval = 1.0 / self.rate
        nxt = time.monotonic()
        n = 0
        while not self.stop.is_set():
            now = time.monotonic()
            if now < nxt:
                time.sleep(min(nxt - now, 0.05))
            nxt += interval
            # Behind (a loaded host): start no more than MAX_LIVE at once.
            if len([p for p in live if p.poll() is None]) < MAX_LIVE:
                live.append(self.one(n))
                n += 1
                self.started_so_far = n
            for p in live:
                if p.poll() is not None:
                    self.reap(p)
            live = [p for p in live if p.returncode is None]
        for p in live:
            p.wait()
            self.reap(p)
        self.started = n

    def start(self):
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def finish(self, timeout=120):
        """Stops starting processes and waits for the live ones; returns how many were started."""
        self.stop.set()
        if self.thread:
            self.thread.join(timeout=timeout)
        return self.started
