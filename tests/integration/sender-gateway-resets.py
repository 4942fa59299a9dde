#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Exactly-once through connection resets, sender against the real gateway:
a TCP proxy in this test reads the HTTP/2 frames passing through and, on a
script, resets the connection either after the request's first DATA frame
(request cut: the gateway never processes it) or when the response's HEADERS
frame comes back (response lost: the gateway processed it, the sender resends
the same sequence and the gateway must answer from its de-duplication
window). The gateway's accepted count equals what was submitted."""
import importlib.machinery
import os
import shutil
import socket
import struct
import threading

lib = importlib.machinery.SourceFileLoader("sender_lib", os.path.join(os.path.dirname(__file__), "sender-lib.py")).load_module()

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_DATA, FRAME_HEADERS = 0, 1


def rst(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


class Proxy(threading.Thread):
    """Connection k (1-based): k % cut == 0 cut the request; k % lose == 0 lose the response."""

    def __init__(self, upstream_port, cut, lose):
        super().__init__(daemon=True)
        self.up = upstream_port
        self.cut, self.lose = cut, lose
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.n = 0
        self.cuts = self.losses = 0
        self.lock = threading.Lock()
        self.stopping = False

    def run(self):
        while not self.stopping:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            self.n += 1
            mode = "lose" if self.lose and self.n % self.lose == 0 else "cut" if self.cut and self.n % self.cut == 0 else ""
            try:
                u = socket.create_connection(("127.0.0.1", self.up))
            except OSError:
                c.close()
                continue
            threading.Thread(target=self.pump, args=(c, u, True, mode), daemon=True).start()
            threading.Thread(target=self.pump, args=(u, c, False, mode), daemon=True).start()

    def pump(self, src, dst, client_to_server, mode):
        """Forwards whole HTTP/2 frames, acting on the first one that matters for the mode."""
        buf = b""
        skip = len(PREFACE) if client_to_server else 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                buf += data
                out = b""
                while True:
                    if skip:
                        if len(buf) < skip:
                            break
                        out, buf, skip = out + buf[:skip], buf[skip:], 0
                        continue
                    if len(buf) < 9:
                        break
                    length = int.from_bytes(buf[:3], "big")
                    ftype = buf[3]
                    stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                    if len(buf) < 9 + length:
                        break
                    frame, buf = buf[:9 + length], buf[9 + length:]
                    if (mode == "cut" and client_to_server and ftype == FRAME_DATA) or \
                       (mode == "lose" and not client_to_server and ftype == FRAME_HEADERS and stream):
                        with self.lock:
                            if mode == "cut":
                                self.cuts += 1
                            else:
                                self.losses += 1
                        if out:
                            dst.sendall(out)
                        rst(src)
                        rst(dst)
                        return
                    out += frame
                if out:
                    dst.sendall(out)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self):
        self.stopping = True
        self.ls.close()


tmp = lib.tmpdir()
W, N = 24, 40
expected = lib.expected_per_pid(W, N)
total = sum(expected.values())
gw = lib.Gateway(tmp, "resets")
proxy = Proxy(gw.port, cut=3, lose=4)
proxy.start()
try:
    rc, out, err = lib.run_driver(["--endpoint", f"http://127.0.0.1:{proxy.port}", "--windows", str(W), "--samples",
                                   str(N), "--interval-ms", "20", "--backoff-ms", "20,200",
                                   "--flush-timeout-ms", "30000"])
    m = gw.metrics()
finally:
    proxy.stop()
    gw.stop()
if rc != 0:
    print(err[-3000:])
lib.check(rc == 0 and out["accepted"] == total and out["dropped"] == 0,
          f"the sender counts all {total} accepted, none dropped (exit {rc})")
lib.check(proxy.cuts > 0 and proxy.losses > 0, f"the proxy cut {proxy.cuts} requests and lost {proxy.losses} responses")
lib.check(m.get("stackrelay_gateway_agent_duplicate_requests_total", 0) >= 1,
          f"the gateway recognised resends ({m.get('stackrelay_gateway_agent_duplicate_requests_total')})")
lib.check(m.get("stackrelay_gateway_samples_accepted_total") == total,
          f"the gateway accepted exactly {total} ({m.get('stackrelay_gateway_samples_accepted_total')}), once each")
shutil.rmtree(tmp)
