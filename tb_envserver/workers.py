"""Several server processes on one port, each owning the episodes it started.

Why: one process runs Python on one core. With ``--workers N`` the CLI forks N processes that
accept on the same port (SO_REUSEPORT; the kernel spreads connections by address hash). An
episode lives where it was reset — its sandbox and suspended attempt are that process's memory —
and its id starts with the owner's index (two hex digits). A kept-alive connection always reaches
the same process, but a new one may land elsewhere: that process relays the request to the owner's
private port and the answer back, so any connection can drive any episode and none is lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from tb_engine.training.environment import Environment
from tb_envserver.http11 import Answer, Request, listening_socket

MAX_WORKERS = 256  # the owner index is two hex digits of the episode id


def worker_prefix(index: int) -> str:
    """The episode-id prefix of the worker with this index."""
    return f"{index:02x}"


def episode_owner(episode_id: Any, workers: int) -> int | None:
    """The index of the worker that owns ``episode_id``, or None when the id names no worker."""
    if not isinstance(episode_id, str) or len(episode_id) < 2:
        return None
    try:
        owner = int(episode_id[:2], 16)
    except ValueError:
        return None
    return owner if owner < workers else None


class Peers:
    """This worker's index, every worker's private address, and relaying to them.

    Relays use kept-alive connections to the owner's private port, one per request in flight (an
    idle pool per peer), so a slow answer from one worker never holds up another relay.
    """

    def __init__(self, index: int, addresses: list[tuple[str, int]], private_socket: socket.socket):
        self.index = index
        self.addresses = addresses
        self.private_socket = private_socket
        self._idle: dict[int, list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}

    @property
    def count(self) -> int:
        return len(self.addresses)

    def others(self) -> list[int]:
        return [i for i in range(self.count) if i != self.index]

    def owner_elsewhere(self, episode_id: Any) -> int | None:
        """The owning worker when it is another process, else None (handle here)."""
        owner = episode_owner(episode_id, self.count)
        return None if owner is None or owner == self.index else owner

    async def relay(self, owner: int, method: str, target: str, body: bytes) -> Answer:
        """Send one request to worker ``owner``; its (status, JSON body) as it answered."""
        idle = self._idle.setdefault(owner, [])
        if idle:
            reader, writer = idle.pop()
        else:
            reader, writer = await asyncio.open_connection(*self.addresses[owner])
        try:
            head = (
                f"{method} {target} HTTP/1.1\r\nHost: worker-{owner}\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            writer.write(head.encode() + body)
            status, length = _response_head(await reader.readuntil(b"\r\n\r\n"))
            payload = await reader.readexactly(length)
        except BaseException:
            writer.close()
            raise
        idle.append((reader, writer))
        return status, payload

    async def gather_health(self, local: dict[str, Any]) -> Answer:
        """/health over all workers: open and finished episodes summed."""
        totals = dict(local, workers=self.count)
        for peer in self.others():
            try:
                status, payload = await self.relay(peer, "GET", "/health", b"")
            except (OSError, asyncio.IncompleteReadError) as exc:
                return 502, {"error": f"worker {peer} is unavailable: {exc}"}
            other = json.loads(payload)
            totals["episodes"] += other["episodes"]
            totals["finished"] += other["finished"]
        return 200, totals


def _response_head(head: bytes) -> tuple[int, int]:
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return status, int(value)
    raise ConnectionError("worker answered without Content-Length")


def relayed_episode(request: Request, body: bytes) -> Any:
    """The episode id a /step or /state request names (None for other requests or unreadable bodies)."""
    if request.method == "GET" and request.path.startswith("/state/"):
        return request.path[len("/state/") :]
    if request.method == "POST" and request.path == "/step":
        try:
            data = json.loads(body)
        except ValueError:
            return None  # answered here with the usual 400
        return data.get("episode_id") if isinstance(data, dict) else None
    return None


class WorkerCountError(ValueError):
    """--workers outside 1..MAX_WORKERS."""


def serve(
    env: Environment,
    host: str,
    port: int,
    *,
    workers: int = 1,
    verbose: bool = False,
    announce: Callable[[str], None] = print,
) -> int:
    """Serve ``env`` until stopped: in this process, or in ``workers`` forked processes on one port.

    ``announce`` gets the URL once the port accepts connections. Returns the exit code.
    """
    from tb_envserver.server import EnvServer

    if not 1 <= workers <= MAX_WORKERS:
        raise WorkerCountError(f"--workers: expected 1..{MAX_WORKERS}, got {workers}")
    if workers > 1:
        return serve_workers(env, host, port, workers, verbose=verbose, announce=announce)
    server = EnvServer(env, host, port, verbose=verbose)
    announce(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        env.close()
    return 0


def serve_workers(
    env: Environment,
    host: str,
    port: int,
    workers: int,
    *,
    verbose: bool = False,
    announce: Callable[[str], None] = print,
) -> int:
    """Fork ``workers`` processes serving ``env`` on one port; returns when they have all stopped.

    The suite is loaded once, before the fork, and shared copy-on-write. SIGTERM/SIGINT stop every
    worker; if one dies, the others are stopped too (its episodes are gone, so fail loudly).
    """
    from tb_envserver.server import EnvServer

    if not 2 <= workers <= MAX_WORKERS:
        raise ValueError(f"workers: expected 2..{MAX_WORKERS}, got {workers}")
    first = listening_socket(host, port, reuse_port=True)
    port = first.getsockname()[1]
    public = [first] + [listening_socket(host, port, reuse_port=True) for _ in range(workers - 1)]
    private = [listening_socket("127.0.0.1", 0) for _ in range(workers)]
    addresses = [sock.getsockname()[:2] for sock in private]
    parent = os.getpid()
    children: list[int] = []
    for index in range(workers):
        pid = os.fork()
        if pid == 0:  # the worker: keep its own sockets only, serve until told to stop
            code = 0
            try:
                for i in range(workers):
                    if i != index:
                        public[i].close()
                        private[i].close()
                env.id_prefix = worker_prefix(index)
                server = EnvServer(
                    env, sock=public[index], verbose=verbose, peers=Peers(index, addresses, private[index])
                )
                server.serve_forever(parent=parent)
            except KeyboardInterrupt:
                pass
            except BaseException as exc:  # report, then leave without running the parent's cleanup
                print(f"worker {index}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                code = 1
            finally:
                os._exit(code)
        children.append(pid)
    for sock in public + private:
        sock.close()  # the workers hold their own references
    announce(f"http://{host}:{port}")
    return _supervise(children)


def _supervise(children: list[int]) -> int:
    """Wait for the workers; forward SIGTERM/SIGINT; stop all when one dies."""
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        _signal_all(children, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    code = 0
    try:
        remaining = set(children)
        while remaining:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            remaining.discard(pid)
            if not stopping:
                print(
                    f"envserver: worker process {pid} exited ({status}); stopping the others",
                    file=sys.stderr,
                    flush=True,
                )
                stopping, code = True, 1
                _signal_all(remaining, signal.SIGTERM)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code


def _signal_all(pids, sig: int) -> None:
    for pid in list(pids):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
