"""HTTP front of the training environment (OpenEnv style), stdlib only.

POST /reset {task_id?, seed?}            -> {episode_id, task_id, observation: {policy, tools, messages}}
POST /step  {episode_id, action}         -> {observation, reward, done, info}
GET  /state/{episode_id}                 -> where the episode stands
GET  /health                             -> pool size, open and finished episodes
Errors are JSON {"error": "..."} with a 4xx/5xx status. HTTP/1.1 keep-alive, so a trainer's
connection is reused across steps.

One event-loop thread parses requests (``http11``) and runs each episode's step inline: a step is
CPU work on a suspended generator, so there is nothing to wait for and no thread to hand off to.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import time
from collections import deque
from typing import Any

from tb_engine.training.environment import EnvError, Environment
from tb_envserver.http11 import MAX_BODY_BYTES, Answer, HttpConnection, Request, listening_socket
from tb_envserver.workers import Peers, relayed_episode

__all__ = ["MAX_BODY_BYTES", "EnvServer", "route"]

REAP_EVERY_S = 5.0
PARENT_CHECK_S = 1.0


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
            return 200, env.state(path[len("/state/") :])
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
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise EnvError(400, f"request body: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise EnvError(400, "request body: expected a JSON object")
    return data


class EnvServer:
    """Serves one Environment on an asyncio loop, with a periodic reaper for idle episodes.

    ``serve_forever`` runs in the calling thread (the CLI); ``start_background`` in a daemon thread
    (tests, benchmarks), stopped by ``shutdown_all``. With ``peers`` it is one of several worker
    processes (``workers.py``): requests for another worker's episodes are relayed to it, and it
    also answers its peers' relays on its private socket.
    """

    def __init__(
        self,
        env: Environment,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        verbose: bool = False,
        sock: socket.socket | None = None,
        peers: Peers | None = None,
    ):
        self.env = env
        self.verbose = verbose
        self.peers = peers
        self.socket = sock if sock is not None else listening_socket(host, port)
        self.server_address = self.socket.getsockname()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._resets: deque[tuple[HttpConnection, Request, bytes]] = deque()
        self._in_flight: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    # -- requests --------------------------------------------------------------------------

    def handle(self, connection: HttpConnection, request: Request, body: bytes) -> Answer | None:
        """A request on the public port: relayed when another worker owns its episode, else local."""
        if self.peers is not None:
            owner = self.peers.owner_elsewhere(relayed_episode(request, body))
            if owner is not None:
                self._later(connection, request, self._relay(owner, request, body))
                return None
            if request.path == "/health" and request.method == "GET":
                self._later(connection, request, self.peers.gather_health(self.env.health()))
                return None
        return self.handle_here(connection, request, body)

    def handle_here(self, connection: HttpConnection, request: Request, body: bytes) -> Answer | None:
        """Answer now, except /reset: resets wait in a queue served one per loop pass (``_start_one``)."""
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

    async def _relay(self, owner: int, request: Request, body: bytes) -> Answer:
        try:
            return await self.peers.relay(owner, request.method, request.target, body)
        except (OSError, asyncio.IncompleteReadError) as exc:
            return 502, {"error": f"worker {owner}, which owns this episode, is unavailable: {exc}"}

    def _later(self, connection: HttpConnection, request: Request, answer) -> None:
        """Answer ``request`` when the coroutine ``answer`` completes (the connection waits meanwhile)."""

        def done(task: asyncio.Task) -> None:
            if task.cancelled():
                return
            failure = task.exception()
            connection.finish(
                request,
                (500, {"error": f"{type(failure).__name__}: {failure}"}) if failure else task.result(),
            )

        task = self._loop.create_task(answer)
        # The loop keeps only a weak reference to a task, and a relay's stream is only weakly held
        # by its transport: without this strong reference a waiting relay can be garbage-collected.
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)
        task.add_done_callback(done)

    def _log(self, line: str) -> None:
        stamp = time.strftime("%d/%b/%Y %H:%M:%S")
        print(f"{self.server_address[0]} - - [{stamp}] {line}", file=sys.stderr, flush=True)

    # -- lifecycle -------------------------------------------------------------------------

    async def serve(self, *, parent: int | None = None) -> None:
        """Accept connections until ``shutdown`` (or, for a worker, until its ``parent`` is gone)."""
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        log = self._log if self.verbose else None
        servers = [await self._loop.create_server(lambda: HttpConnection(self.handle, log), sock=self.socket)]
        if self.peers is not None:  # relays from the other workers: always answered here
            private = self.peers.private_socket
            servers.append(
                await self._loop.create_server(lambda: HttpConnection(self.handle_here, log), sock=private)
            )
        tasks = [self._loop.create_task(self._reap())]
        if parent is not None:
            tasks.append(self._loop.create_task(self._watch_parent(parent)))
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            for task in tasks:
                task.cancel()
            for server in servers:
                server.close()
            self._loop = None

    async def _reap(self) -> None:
        interval = min(REAP_EVERY_S, max(self.env.ttl_s / 4, 0.05))
        while True:
            await asyncio.sleep(interval)
            self.env.expire_idle()

    async def _watch_parent(self, parent: int) -> None:
        """A worker outliving its supervisor would hold the port forever: stop when it is gone."""
        while os.getppid() == parent:
            await asyncio.sleep(PARENT_CHECK_S)
        self._stopped.set()

    def serve_forever(self, *, parent: int | None = None) -> None:
        asyncio.run(self.serve(parent=parent))

    def start_background(self) -> threading.Thread:
        """Serve in a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.serve_forever, name="envserver", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self._thread

    def shutdown(self) -> None:
        """Stop a server running in another thread (start_background) and wait for it."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None:
            try:
                loop.call_soon_threadsafe(stopped.set)
            except RuntimeError:  # the loop has already finished
                pass
        if self._thread is not None:
            self._thread.join(10)

    def server_close(self) -> None:
        self.socket.close()
        if self.peers is not None:
            self.peers.private_socket.close()

    def shutdown_all(self) -> None:
        """Stop serving and end every open episode."""
        self.shutdown()
        self.server_close()
        self.env.close()
