"""A loopback HTTP server that writes raw bytes: for replies no well-behaved server would send.

`RawServer` accepts connections on 127.0.0.1 (an ephemeral port) in a thread, reads one request
(headers and a ``content-length`` body), then hands the socket to a writer function that sends
whatever the test needs: a chunked body that never ends, a line without a newline, a gzip bomb, a
stream whose connection stays open after its last event. The writer's socket is closed when the
server stops.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

Writer = Callable[[socket.socket], None]


def chunked_head(content_type: str = "text/event-stream", **headers: str) -> bytes:
    """The status line and headers of a chunked 200 reply."""
    lines = [
        "HTTP/1.1 200 OK",
        f"content-type: {content_type}",
        "transfer-encoding: chunked",
        *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    """One HTTP chunk."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def send_all(sock: socket.socket, pieces: Iterable[bytes]) -> None:
    """Write pieces until done or the client goes away."""
    with contextlib.suppress(OSError):
        for piece in pieces:
            sock.sendall(piece)


class RawServer:
    """Answers every request on 127.0.0.1 with ``writer(socket)``.

    Args:
        writer: Writes the reply; may block (hold the connection) until `stop` is set.

    Attributes:
        stop: Set when the server closes; writers that hold a connection wait on it.
        requests: How many requests arrived.
    """

    def __init__(self, writer: Writer) -> None:
        self._writer = writer
        self.stop = threading.Event()
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    @property
    def url(self) -> str:
        """The base URL to give a client."""
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self._sockets.append(sock)
            thread = threading.Thread(target=self._answer, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _answer(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            data = b""
            while b"\r\n\r\n" not in data:
                more = sock.recv(65536)
                if not more:
                    return
                data += more
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(body) < length:
                body += sock.recv(65536)
            self.requests += 1
            self._writer(sock)

    def __enter__(self) -> RawServer:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self._threads:
            thread.join(timeout=5)
