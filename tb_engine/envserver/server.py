"""HTTP front of the training environment (OpenEnv style), stdlib only.

POST /reset {task_id?, seed?}            -> {episode_id, task_id, observation: {policy, tools, messages}}
POST /step  {episode_id, action}         -> {observation, reward, done, info}
GET  /state/{episode_id}                 -> where the episode stands
GET  /health                             -> pool size, open episodes
Errors are JSON {"error": "..."} with a 4xx/5xx status. HTTP/1.1 keep-alive, so a trainer's
connection is reused across steps.

Why a hand-written asyncio protocol instead of http.server: a step is ~0.3 ms of engine work, and
BaseHTTPRequestHandler (email-based header parsing, a thread per connection, several writes per
response) cost more than that. Here one event-loop thread parses requests from the socket buffer,
runs the episode's step inline (it is CPU work, and episodes are generators, not threads) and
answers with a single write.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from collections import deque
from http import HTTPStatus
from typing import Any, Callable

from tb_engine.envserver.episodes import EnvError, Environment

MAX_BODY_BYTES = 1 << 20
MAX_HEAD_BYTES = 64 << 10
REAP_EVERY_S = 5.0

Answer = tuple[int, dict[str, Any]]


def route(env: Environment, method: str, path: str, body: bytes) -> Answer:
    """The status and JSON payload for one request; every failure becomes {"error": ...}."""
    try:
        if method == "POST" and path == "/step":
            data = parse_body(body)
            if "episode_id" not in data or "action" not in data:
                raise EnvError(400, "step: episode_id and action are required")
            return 200, env.step(data["episode_id"], data["action"])
        if method == "POST" and path == "/reset":
            data = parse_body(body)
            unknown = sorted(set(data) - {"task_id", "seed"})
            if unknown:
                raise EnvError(400, f"reset: unknown field(s) {', '.join(unknown)}")
            return 200, env.reset(task_id=data.get("task_id"), seed=data.get("seed"))
        if method == "GET" and path.startswith("/state/"):
            return 200, env.state(path[len("/state/"):])
        if method == "GET" and path == "/health":
            return 200, env.health()
        raise EnvError(404, f"{method} {path or '/'}: no such endpoint")
    except EnvError as exc:
        return exc.status, {"error": exc.message}
    except Exception as exc:  # a harness bug must still answer, or the trainer hangs on its socket
        return 500, {"error": f"{type(exc).__name__}: {exc}"}


def parse_body(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EnvError(400, f"request body: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise EnvError(400, "request body: expected a JSON object")
    return data


def request_path(target: str) -> str:
    """The routed path: no query string, no trailing slash."""
    return target.split("?", 1)[0].rstrip("/")


_REASONS = {status.value: status.phrase for status in HTTPStatus}


def response_bytes(status: int, payload: dict[str, Any], *, close: bool = False) -> bytes:
    """A whole HTTP/1.1 response, to go out in one write (no Nagle/delayed-ACK stall between parts)."""
    body = json.dumps(payload, default=str).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n"
    )
    return head.encode() + body


class Request:
    """A parsed request head; the body follows once ``length`` bytes have arrived."""

    __slots__ = ("method", "target", "path", "keep_alive", "length", "continue_sent", "expect_continue")

    def __init__(self, method: str, target: str, keep_alive: bool, length: int, expect_continue: bool):
        self.method, self.target, self.path = method, target, request_path(target)
        self.keep_alive, self.length = keep_alive, length
        self.expect_continue, self.continue_sent = expect_continue, False


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


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


class HttpConnection(asyncio.Protocol):
    """One client connection: parse requests as bytes arrive, answer each in order.

    ``handle`` answers a request at once, or returns None to answer later through ``finish``;
    until then this connection reads no further request, so answers keep the request order.
    """

    def __init__(self, handle: Callable[["HttpConnection", Request, bytes], Answer | None], log: Callable[[str], None] | None):
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
            self.finish(request, answer, drain=False)
        return True

    def finish(self, request: Request, answer: Answer, *, drain: bool = True) -> None:
        """Send the answer to ``request`` and go on with the requests behind it."""
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
        if drain:
            self._transport.resume_reading()
            self._drain()

    def _fail(self, status: int, message: str) -> None:
        """Answer a request that cannot be read and drop the connection (its framing is lost)."""
        self._transport.write(response_bytes(status, {"error": message}, close=True))
        self._transport.close()
        self._transport = None


def listening_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


class EnvServer:
    """Serves one Environment on an asyncio loop, with a periodic reaper for idle episodes.

    ``serve_forever`` runs in the calling thread (the CLI); ``start_background`` in a daemon thread
    (tests, benchmarks), stopped by ``shutdown_all``.
    """

    def __init__(
        self,
        env: Environment,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        verbose: bool = False,
        sock: socket.socket | None = None,
    ):
        self.env = env
        self.verbose = verbose
        self.socket = sock if sock is not None else listening_socket(host, port)
        self.server_address = self.socket.getsockname()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._resets: deque[tuple[HttpConnection, Request, bytes]] = deque()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def handle(self, connection: HttpConnection, request: Request, body: bytes) -> Answer | None:
        """Answer now, except /reset: resets wait in a queue served one per loop pass (see ``_start_one``)."""
        if request.path == "/reset" and request.method == "POST":
            self._resets.append((connection, request, body))
            if len(self._resets) == 1:
                self._loop.call_soon(self._start_one)
            return None
        return route(self.env, request.method, request.path, body)

    def _start_one(self) -> None:
        """Start one queued episode, then yield to the loop.

        Steps of running episodes go first: each loop pass answers every step that has arrived
        and starts at most one new episode. Under overload the wait moves to /reset (a new episode
        starts a little later) instead of stalling every running episode's steps behind a queue
        of resets. No reset starves: one is served on every pass.
        """
        connection, request, body = self._resets.popleft()
        if self._resets:
            self._loop.call_soon(self._start_one)
        if connection.open:
            connection.finish(request, route(self.env, request.method, request.path, body))

    def _log(self, line: str) -> None:
        stamp = time.strftime("%d/%b/%Y %H:%M:%S")
        print(f"{self.server_address[0]} - - [{stamp}] {line}", file=sys.stderr, flush=True)

    def protocol(self) -> HttpConnection:
        return HttpConnection(self.handle, self._log if self.verbose else None)

    async def serve(self) -> None:
        """Accept connections until ``shutdown``; the reaper runs on the same loop."""
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        server = await self._loop.create_server(self.protocol, sock=self.socket)
        reaper = self._loop.create_task(self._reap())
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            reaper.cancel()
            server.close()

    async def _reap(self) -> None:
        interval = min(REAP_EVERY_S, max(self.env.ttl_s / 4, 0.05))
        while True:
            await asyncio.sleep(interval)
            self.env.expire_idle()

    def serve_forever(self) -> None:
        asyncio.run(self.serve())

    def start_background(self) -> threading.Thread:
        """Serve in a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.serve_forever, name="envserver", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self._thread

    def shutdown(self) -> None:
        """Stop a server running in another thread (start_background) and wait for it."""
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)

    def server_close(self) -> None:
        self.socket.close()

    def shutdown_all(self) -> None:
        """Stop serving and end every open episode."""
        self.shutdown()
        self.server_close()
        self.env.close()
