"""A gRPC caller written in HTTP/2 frames, for what gRPC's own clients never send: more streams
on one connection than the server allows (they wait for one to end instead), or a window that
lets the server send nothing (a reader that stopped reading)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping, Sequence

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS = 0x0, 0x1, 0x3, 0x4
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
REFUSED_STREAM = 0x7


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _literal(name: str | bytes, value: str | bytes) -> bytes:
    """One HPACK header, literal and not indexed (RFC 7541 6.2.2); names and values under 127 bytes."""
    n, v = (x.encode() if isinstance(x, str) else x for x in (name, value))
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


class Http2Caller:
    """One connection, its settings exchanged (``settings``, by identifier: ours); :meth:`call`
    opens a stream whatever the server's limit."""

    def __init__(self, port: int, settings: Mapping[int, int] | None = None) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port))
        ours = b"".join(struct.pack(">HI", ident, value) for ident, value in (settings or {}).items())
        self._sock.sendall(PREFACE + _frame(SETTINGS, 0, 0, ours))
        self._next_stream = 1
        #: the server's SETTINGS, by identifier
        self.settings: dict[int, int] = {}
        while True:
            kind, flags, _, payload = self.read_frame()
            if kind == SETTINGS and not flags & ACK:
                self.settings = {ident: value for ident, value in struct.iter_unpack(">HI", payload)}
                # Acknowledged before any stream: gRPC holds a caller to the settings it acknowledged.
                self._sock.sendall(_frame(SETTINGS, ACK, 0))
                return

    def call(self, path: str, message: bytes, metadata: Sequence[tuple[bytes, bytes]] = ()) -> int:
        """Send a unary request on a new stream, with ``metadata`` as sent (gRPC's clients send no
        value that is not ASCII); its id."""
        stream, self._next_stream = self._next_stream, self._next_stream + 2
        headers = b"".join(_literal(k, v) for k, v in ((":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "localhost"),
                                                        ("content-type", "application/grpc"), ("te", "trailers"), *metadata))
        self._sock.sendall(_frame(HEADERS, END_HEADERS, stream, headers) + _frame(DATA, END_STREAM, stream, b"\x00" + struct.pack(">I", len(message)) + message))
        return stream

    def read_frame(self) -> tuple[int, int, int, bytes]:
        """The next frame: its type, flags, stream and payload."""
        head = self._read(9)
        length, kind, flags, stream = int.from_bytes(head[:3], "big"), head[3], head[4], int.from_bytes(head[5:], "big") & 0x7FFF_FFFF
        return kind, flags, stream, self._read(length)

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self._sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            out += chunk
        return out

    def close(self) -> None:
        self._sock.close()
