"""The HTTP/1.1 wire of the environment server: an asyncio protocol for keep-alive JSON requests.

Why not http.server: a step is a fraction of a millisecond of engine work, and
BaseHTTPRequestHandler (email-based header parsing, a thread per connection, several writes per
response) cost more than that. This protocol parses requests straight from the socket buffer and
answers each with a single write; only Content-Length framed bodies are accepted.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

MAX_BODY_BYTES = 1 << 20
MAX_HEAD_BYTES = 64 << 10

# (status, payload): a dict is sent as JSON; bytes are JSON already (an answer relayed from a peer).
Answer = tuple[int, "dict[str, Any] | bytes"]

_REASONS = {status.value: status.phrase for status in HTTPStatus}


def response_bytes(status: int, payload: dict[str, Any] | bytes, *, close: bool = False) -> bytes:
    """A whole HTTP/1.1 response, to go out in one write (no Nagle/delayed-ACK stall between parts)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload, default=str).encode()
    connection = "Connection: close\r\n" if close else ""
    head = f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{connection}\r\n"
    return head.encode() + body


class BadRequest(Exception):
    """A request whose head cannot be used; the connection is answered and closed."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class Request:
    """A parsed request head; the body follows once ``length`` bytes have arrived."""

    __slots__ = ("method", "target", "path", "keep_alive", "length", "expect_continue", "continue_sent")

    def __init__(self, method: str, target: str, keep_alive: bool, length: int, expect_continue: bool):
        self.method, self.target = method, target
        self.path = target.split("?", 1)[0].rstrip("/")  # routed path: no query string, no trailing slash
        self.keep_alive, self.length = keep_alive, length
        self.expect_continue, self.continue_sent = expect_continue, False


def parse_head(head: bytes) -> Request:
    """Request line and the few headers the server needs (length, keep-alive, 100-continue)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(400, f"malformed request line {lines[0][:100]!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest(411, "request body: chunked encoding is not supported; send Content-Length")
    try:
        length = int(headers.get("content-length") or 0)
    except ValueError:
        raise BadRequest(400, f"Content-Length: not a number: {headers['content-length'][:40]!r}") from None
    if length < 0:
        raise BadRequest(400, "Content-Length: negative")
    if length > MAX_BODY_BYTES:
        raise BadRequest(413, f"request body: {length} bytes exceeds {MAX_BODY_BYTES}")
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    return Request(method, target, keep_alive, length, headers.get("expect", "").lower() == "100-continue")


Handler = Callable[["HttpConnection", Request, bytes], "Answer | None"]


class HttpConnection(asyncio.Protocol):
    """One client connection: parse requests as bytes arrive, answer each in order.

    ``handle`` answers a request at once, or returns None and answers later through ``finish``;
    until then this connection reads no further request, so answers keep the request order.
    """

    def __init__(self, handle: Handler, log: Callable[[str], None] | None = None):
        self._handle = handle
        self._log = log
        self._buffer = bytearray()
        self._request: Request | None = None
        self._waiting = False  # a request of this connection is answered later
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None

    @property
    def open(self) -> bool:
        return self._transport is not None

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._waiting:
            if len(self._buffer) > MAX_HEAD_BYTES + MAX_BODY_BYTES:
                self._transport.pause_reading()  # a client racing ahead of its answers; resumed in finish()
            return
        self._drain()

    def _drain(self) -> None:
        while self._transport is not None and not self._waiting and self._next():
            pass

    def _next(self) -> bool:
        """Handle one complete request from the buffer; False when more bytes are needed."""
        buffer = self._buffer
        request = self._request
        if request is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEAD_BYTES:
                    self._fail(431, f"request head exceeds {MAX_HEAD_BYTES} bytes")
                return False
            try:
                request = parse_head(bytes(buffer[:end]))
            except BadRequest as exc:
                self._fail(exc.status, exc.message)
                return False
            del buffer[: end + 4]
            self._request = request
        if len(buffer) < request.length:
            if request.expect_continue and not request.continue_sent:
                request.continue_sent = True
                self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return False
        body = bytes(buffer[: request.length])
        del buffer[: request.length]
        self._request = None
        self._waiting = True
        answer = self._handle(self, request, body)
        if answer is not None:
            self.finish(request, answer, resume=False)
        return True

    def finish(self, request: Request, answer: Answer, *, resume: bool = True) -> None:
        """Send the answer to ``request`` and go on with the requests queued behind it."""
        self._waiting = False
        if self._transport is None:
            return  # the client went away meanwhile
        status, payload = answer
        self._transport.write(response_bytes(status, payload, close=not request.keep_alive))
        if self._log is not None:
            self._log(f'"{request.method} {request.target}" {status}')
        if not request.keep_alive:
            self._transport.close()
            self._transport = None
            return
        if resume:
            self._transport.resume_reading()
            self._drain()

    def _fail(self, status: int, message: str) -> None:
        """Answer a request that cannot be read and drop the connection (its framing is lost)."""
        self._transport.write(response_bytes(status, {"error": message}, close=True))
        self._transport.close()
        self._transport = None


def listening_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A non-blocking listening TCP socket (SO_REUSEPORT when several processes share the port)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock
