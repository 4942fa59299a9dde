#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A minimal OTLP/HTTP backend for benchmarks: answers 200 (empty body) to
every POST after reading it, and only counts requests and body bytes (as
sent, i.e. gzip when the exporter compresses). GET /stats returns them as
JSON. It never decodes anything, so its own CPU stays small; benches read it
from /proc to show the ratio honestly.

Usage: sink.py PORT_FILE [--keep FILE]   (writes the port it listens on, 127.0.0.1)
--keep appends every body as received to FILE ("<request number> <length>\n"
then the bytes), so the bench can check afterwards what the gateway sent
(frames named) without decoding anything here.
Stops by itself after --max-seconds (default 3600) like every helper.
"""
import http.server
import json
import os
import sys
import threading

stats = {"requests": 0, "bytes": 0}
lock = threading.Lock()
keep = None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        left = n
        chunks = []
        while left > 0:
            chunk = self.rfile.read(min(left, 1 << 20))
            if not chunk:
                break
            left -= len(chunk)
            if keep:
                chunks.append(chunk)
        with lock:
            stats["requests"] += 1
            stats["bytes"] += n
            if keep:
                body = b"".join(chunks)
                keep.write(b"%d %d\n" % (stats["requests"], len(body)))
                keep.write(body)
                keep.flush()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):
        with lock:
            body = json.dumps(stats).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def main():
    global keep
    max_seconds = 3600
    if "--keep" in sys.argv:
        keep = open(sys.argv[sys.argv.index("--keep") + 1], "ab")
    if "--max-seconds" in sys.argv:
        max_seconds = float(sys.argv[sys.argv.index("--max-seconds") + 1])
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(s.server_address[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    threading.Timer(max_seconds, s.shutdown).start()
    s.serve_forever()


if __name__ == "__main__":
    main()
