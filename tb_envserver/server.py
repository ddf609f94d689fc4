"""Serve the environment app with uvicorn: in the calling thread (the CLI) or a background thread.

Why a library and not our own HTTP/1.1 protocol (which this package had until issue 15): measured
on ``bench/env_server.py`` (64 concurrent golden episodes, 2 worker processes, 4 client processes,
127.0.0.1, the shared 2-core machine, three runs each, RESULT episodes/s, step p50 / p95 ms):

* hand-written asyncio protocol: 1362 / 1278 / 1014 episodes/s, p50 1.85-2.76, p95 3.8-5.7
* uvicorn (httptools parser, uvloop) + Starlette: 1170 / 1122 / 1131, p50 2.41-2.47, p95 4.6-4.8
* uvicorn with its pure-Python h11 parser on asyncio's loop: 934 / 919, p50 4.3-4.4, p95 6.3-6.9

So the library with its fast parser and loop is within about 6 % of the hand-written stack
(inside the run-to-run spread) and needs no parser of ours; with h11 it would cost a quarter of the
throughput and double the step latency, hence httptools and uvloop. In real training the server
waits on the policy's generation (``--think-ms 250``: the server is mostly idle), far below either.
"""

from __future__ import annotations

import asyncio
import copy
import os
import socket
import threading
import time
from typing import Any

import uvicorn
import uvloop
from uvicorn.config import LOGGING_CONFIG

from tb_engine.training.environment import Environment
from tb_envserver.app import create_app
from tb_envserver.relay import Peers

REAP_EVERY_S = 5.0
PARENT_CHECK_S = 1.0
# A trainer's connection may idle for as long as its policy generates: keep it as long as an episode lives.
KEEP_ALIVE_S = 300
GRACEFUL_SHUTDOWN_S = 5


def listening_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A listening TCP socket (SO_REUSEPORT when several processes share the port).

    Made with proto IPPROTO_TCP on purpose: uvicorn writes a response's head and body separately,
    so without TCP_NODELAY on the accepted socket Nagle's algorithm and the client's delayed ACK
    hold every answer back by about 40 ms. uvloop sets it on every TCP socket; asyncio's own loop
    only on sockets of that proto.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _log_config() -> dict[str, Any]:
    """uvicorn's logging with the access log on stderr (stdout carries the CLI's own lines)."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return config


class EnvServer:
    """Serves one Environment with a periodic reaper for idle episodes.

    ``serve_forever`` runs in the calling thread (the CLI); ``start_background`` in a daemon thread
    (tests, benchmarks), stopped by ``shutdown_all``. With ``peers`` it is one of several worker
    processes (``workers.py``) and also answers its peers' relays on its private socket.
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
        self.peers = peers
        self.socket = sock if sock is not None else listening_socket(host, port)
        self.server_address = self.socket.getsockname()
        config = uvicorn.Config(
            create_app(env, peers=peers),
            http="httptools",
            ws="websockets-sansio",  # OpenEnv's /ws sessions
            lifespan="off",
            log_config=_log_config() if verbose else None,
            log_level="info" if verbose else "warning",
            access_log=verbose,
            server_header=False,
            timeout_keep_alive=KEEP_ALIVE_S,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    async def serve(self, *, parent: int | None = None) -> None:
        """Accept connections until ``shutdown`` (or, for a worker, until its ``parent`` is gone)."""
        sockets = [self.socket] + ([self.peers.private_socket] if self.peers is not None else [])
        tasks = [asyncio.create_task(self._reap())]
        if parent is not None:
            tasks.append(asyncio.create_task(self._watch_parent(parent)))
        try:
            await self._server.serve(sockets=sockets)
        finally:
            for task in tasks:
                task.cancel()
            if self.peers is not None:
                await self.peers.close()

    async def _reap(self) -> None:
        interval = min(REAP_EVERY_S, max(self.env.ttl_s / 4, 0.05))
        while True:
            await asyncio.sleep(interval)
            self.env.expire_idle()

    async def _watch_parent(self, parent: int) -> None:
        """A worker outliving its supervisor would hold the port forever: stop when it is gone."""
        while os.getppid() == parent:
            await asyncio.sleep(PARENT_CHECK_S)
        self._server.should_exit = True

    def serve_forever(self, *, parent: int | None = None) -> None:
        """Serve on a uvloop event loop in this thread; in the main thread SIGINT/SIGTERM stop it."""
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(self.serve(parent=parent))

    def start_background(self) -> threading.Thread:
        """Serve in a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.serve_forever, name="envserver", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        return self._thread

    def shutdown(self) -> None:
        """Stop a server running in another thread (start_background) and wait for it."""
        self._server.should_exit = True
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
