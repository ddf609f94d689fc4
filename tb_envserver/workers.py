"""Several server processes on one port, each owning the episodes it started.

Why: one process runs Python on one core. With ``--workers N`` the CLI forks N processes that
accept on the same port (SO_REUSEPORT; the kernel spreads connections by address hash). An
episode lives where it was reset — its sandbox and suspended attempt are that process's memory —
and its id starts with the owner's index (two hex digits). A kept-alive connection always reaches
the same process, but a new one may land elsewhere: that process relays the request to the owner's
private port and the answer back (``relay.py``), so any connection can drive any episode.
uvicorn's own ``--workers`` cannot do this: its workers share nothing and know nothing of each other.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterable
from typing import Any

from tb_engine.training.environment import Environment
from tb_envserver.relay import MAX_WORKERS, Peers, worker_prefix
from tb_envserver.server import EnvServer, listening_socket

__all__ = ["MAX_WORKERS", "WorkerCountError", "serve", "serve_workers"]


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


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in list(pids):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
