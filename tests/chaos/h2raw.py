# SPDX-License-Identifier: Apache-2.0
"""HTTP/2 written by hand (RFC 9113 frames, RFC 7541 literal header fields),
so the chaos tests can break the protocol on purpose where client libraries
will not: resets in a loop, endless CONTINUATION frames, oversized header
lists, windows of zero, bodies that lie. Python's standard library only."""
import socket
import ssl
import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
CANCEL = 0x8
PUSH_PATH = "/stackrelay.v1.Ingest/Push"


def frame(ftype, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream_id) + payload


def hpack_int(value, prefix_bits, first=0):
    """RFC 7541 5.1: an integer with an N-bit prefix; first holds the bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name, value):
    """A literal header field without indexing, new name, no Huffman coding (RFC 7541 6.2.2)."""
    name, value = name.encode() if isinstance(name, str) else name, value.encode() if isinstance(value, str) else value
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def request_block(extra=(), token=None, path=PUSH_PATH, gzip=False):
    hs = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "gateway"),
          ("content-type", "application/x-protobuf")]
    if gzip:
        hs.append(("content-encoding", "gzip"))
    if token is not None:
        hs.append(("authorization", "Bearer " + token))
    return b"".join(literal(n, v) for n, v in hs + list(extra))


def settings(pairs=()):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pb_bytes(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b


def push_request(instance_id=b"chaos-instance-0", sequence=1):
    """A valid PushRequest without samples: version 1, a resource, a sequence, 19 Hz."""
    resource = pb_bytes(1, instance_id) + pb_bytes(2, b"chaos-host") + pb_bytes(4, b"chaos")
    return varint(1 << 3) + varint(1) + pb_bytes(2, resource) + varint(3 << 3) + varint(sequence) + \
        varint(4 << 3) + varint(19)


class Closed(Exception):
    pass


class Conn:
    """One client connection: h2c or TLS (ALPN h2), from a chosen source address.

    It reads only when told to (read()), answering the server's SETTINGS, so a
    test can also never read at all."""

    def __init__(self, port, src="127.0.0.2", tls=None, client_settings=(), timeout=10, preface=True):
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(src, 0))
        if tls is not None:
            s = tls.wrap_socket(s, server_hostname="localhost")
        self.s = s
        self.buf = b""
        self.closed = False
        self.goaways = self.resets = self.headers = 0
        self.next_id = 1
        if preface:
            self.send(PREFACE + settings(client_settings))

    def send(self, data):
        try:
            self.s.sendall(data)
        except (OSError, ssl.SSLError) as e:
            self.closed = True
            raise Closed(str(e))

    def read(self, wait=0.0):
        """Reads what has arrived (waiting up to wait seconds for the first bytes); False once closed."""
        self.s.settimeout(wait if wait > 0 else 0)
        try:
            while True:
                d = self.s.recv(65536)
                if not d:
                    self.closed = True
                    break
                self.buf += d
                self.s.settimeout(0)
        except (BlockingIOError, socket.timeout, ssl.SSLWantReadError):
            pass
        except (OSError, ssl.SSLError):
            self.closed = True
        self._parse()
        return not self.closed

    def _parse(self):
        acks = b""
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + n:
                break
            ftype, flags = self.buf[3], self.buf[4]
            if ftype == SETTINGS and not flags & ACK:
                acks += frame(SETTINGS, ACK, 0)
            elif ftype == GOAWAY:
                self.goaways += 1
            elif ftype == RST_STREAM:
                self.resets += 1
            elif ftype == HEADERS:
                self.headers += 1
            self.buf = self.buf[9 + n:]
        if acks and not self.closed:
            try:
                self.send(acks)
            except Closed:
                pass

    def stream(self):
        sid = self.next_id
        self.next_id += 2
        return sid

    def post(self, body, **kw):
        """A whole request: HEADERS then DATA (END_STREAM) in 16 KiB frames."""
        sid = self.stream()
        out = frame(HEADERS, END_HEADERS | (0 if body else END_STREAM), sid, request_block(**kw))
        for off in range(0, len(body), 16384):
            last = off + 16384 >= len(body)
            out += frame(DATA, END_STREAM if last else 0, sid, body[off:off + 16384])
        self.send(out)
        return sid

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass
