#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A real debuginfod (Debian's `debuginfod`) on loopback serves the debug file
of a test binary; the gateway's symbolizer (bench/symbolize/sym-resolve, the
library the symbolize processor runs) resolves the *stripped* binary's
addresses to function, file, line and inlined frames through it, then again
from its disk store with the server gone. An unknown build ID fails over to
"wanted from the agent" without hanging."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402

SKIP = 77


def log(*a):
    print("sym-debuginfod:", *a, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)




def nm(path):
    out = run(["nm", "-P", "-S", "--defined-only", path]).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[1] in "Tt":
            syms[f[0]] = (int(f[2], 16), int(f[3], 16))
    return syms


def build_id(path):
    out = run(["readelf", "-n", path]).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split()[-1]
    raise SystemExit("no build ID in " + path)


def marker(src, mark):
    with open(src) as f:
        for i, line in enumerate(f, 1):
            if mark in line:
                return i
    raise SystemExit("no marker " + mark)


class SlowServer:
    """Accepts HTTP requests and answers none of them for 60 s (an overloaded debuginfod)."""

    def __init__(self):
        import http.server
        import threading
        outer = self
        self.requests = 0
        self.stopping = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests += 1
                outer.stopping.wait(60)
                try:
                    self.send_error(404)
                except OSError:
                    pass

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def main():
    for tool in ("debuginfod", "gcc", "objcopy", "nm", "readelf"):
        if not shutil.which(tool):
            print(f"sym-debuginfod: SKIP: {tool} not installed (scripts/install-deps)")
            return SKIP
    build = os.environ.get("SR_BUILD_ROOT", "build")
    fixtures = os.environ.get("SR_TEST_FIXTURES", "tests/fixtures")
    resolver = os.path.join(build, "bench", "symbolize", "sym-resolve")
    if not os.access(resolver, os.X_OK):
        raise SystemExit(f"{resolver} not built")
    src = os.path.join(fixtures, "sym", "prog.c")
    tmp = tempfile.mkdtemp(prefix="sr-sym-debuginfod.")
    server = None
    try:
        srv = os.path.join(tmp, "srv")
        os.makedirs(srv)
        prog = os.path.join(tmp, "prog")
        run(["gcc", "-O1", "-g", "-o", prog, src])
        run(["objcopy", "--only-keep-debug", prog, os.path.join(srv, "prog.debug")])
        run(["objcopy", "--strip-all", prog, os.path.join(tmp, "prog.stripped")])
        syms = nm(prog)
        bid = build_id(os.path.join(tmp, "prog.stripped"))
        stripped_syms = subprocess.run(["nm", "-P", os.path.join(tmp, "prog.stripped")], capture_output=True,
                                       text=True).stdout
        assert "sr_fixture_leaf" not in stripped_syms, "the stripped binary still has symbols"
        port = free_port()
        server = subprocess.Popen(
            ["debuginfod", "-F", "-p", str(port), "-d", os.path.join(tmp, "db.sqlite"), "-t", "0",
             "-g", "0", srv],
            stdout=open(os.path.join(tmp, "debuginfod.log"), "w"), stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        # Wait (bounded) until the scan has indexed the debug file.
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                raise SystemExit("debuginfod exited: " + open(os.path.join(tmp, "debuginfod.log")).read())
            try:
                with urllib.request.urlopen(f"{url}/buildid/{bid}/debuginfo", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("debuginfod did not index the debug file in 60 s")
            time.sleep(0.3)
        log("debuginfod serving", bid, "on", url)

        leaf, leaf_size = syms["sr_fixture_leaf"]
        middle, _ = syms["sr_fixture_middle"]
        addrs = [hex(a) for a in range(leaf, leaf + leaf_size)] + [hex(middle)]
        cache = os.path.join(tmp, "cache")
        env = dict(os.environ, HOME=tmp)
        env.pop("DEBUGINFOD_URLS", None)
        # Under ASan: glibc's dprintf buffer inside libdebuginfod is reported as a leak (not ours).
        supp = os.path.join(fixtures, "sym", "lsan.supp")
        env["LSAN_OPTIONS"] = (env.get("LSAN_OPTIONS", "") + ":suppressions=" + supp).lstrip(":")

        def resolve(extra):
            p = subprocess.run([resolver, "--id", bid, "--cache-dir", cache, "--wait", "20"] + extra + addrs,
                               capture_output=True, text=True, env=env, timeout=60)
            log(p.stderr.strip())
            if p.returncode != 0:
                raise SystemExit(f"sym-resolve failed ({p.returncode}): {p.stderr}")
            return [line.split("\t") for line in p.stdout.splitlines()]

        inner, call = marker(src, "MARK:inner"), marker(src, "MARK:call")

        def check(rows, lines_expected):
            inlined = 0
            for row in rows[:-1]:
                # Outermost frame: the out-of-line function, in prog.c.
                assert row[-2] == "sr_fixture_leaf", row
                if lines_expected:
                    assert row[-1].split(":")[0].endswith("prog.c"), row
                    if len(row) == 5 and row[1] == "sr_fixture_inline_add":
                        assert int(row[2].split(":")[1]) == inner, row
                        assert int(row[4].split(":")[1]) == call, row
                        inlined += 1
            assert rows[-1][1] == "sr_fixture_middle", rows[-1]
            if lines_expected:
                assert inlined > 0, "no inlined frame resolved"
            return inlined

        n = check(resolve(["--debuginfod", url]), True)
        log(f"resolved {len(addrs)} addresses through debuginfod; {n} with an inlined frame")

        # The server goes away: the disk store (table + debug file) still answers, lines included.
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        server = None
        stored = os.path.join(cache, ".build-id", bid[:2], bid[2:] + ".debug")
        assert os.path.exists(stored), "debug file not kept in cache_dir"
        assert os.path.exists(os.path.join(cache, "symtab", bid[:2], bid[2:] + ".sym"))
        check(resolve([]), True)
        log("resolved again from cache_dir with debuginfod stopped")

        # An unknown build ID against a dead server: fails fast, ends "wanted" (agent upload next).
        p = subprocess.run([resolver, "--id", "00" * 20, "--debuginfod", url, "--wait", "10",
                            "--cache-dir", os.path.join(tmp, "cache-unknown"), "0x1000"],
                           capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 1 and "symbols wanted" in p.stderr, p.stderr
        assert p.stdout.strip() == "0x1000\t??", p.stdout
        log("unknown build ID: wanted from the agent")
        # A server that accepts and then never answers: the lookup is abandoned at
        # debuginfod_timeout (2 s here) instead of holding a fetch thread (the fake holds 60 s).
        slow = SlowServer()
        try:
            t0 = time.monotonic()
            # A fresh cache_dir: libdebuginfod keeps its own negative cache there.
            p = subprocess.run([resolver, "--id", "11" * 20, "--debuginfod", slow.url, "--wait", "2",
                                "--cache-dir", os.path.join(tmp, "cache-slow"), "0x1000"],
                               capture_output=True, text=True, env=env, timeout=60)
            took = time.monotonic() - t0
        finally:
            slow.stop()
        assert p.returncode == 1 and "symbols wanted" in p.stderr, p.stderr
        assert slow.requests >= 1, "the slow server was never asked"
        assert took < 30, f"a 2 s debuginfod_timeout took {took:.1f} s against a server that holds 60 s"
        log(f"unresponsive server: gave up after {took:.1f} s (debuginfod_timeout 2 s)")
        print("sym-debuginfod: 1 passed, 0 failed")
        return 0
    finally:
        if server is not None:
            server.kill()
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
