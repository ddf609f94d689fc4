"""The embedded mode's worker: a real Celery worker process on the filesystem broker.

With no broker configured, ``demo`` and ``run_campaign --wait`` start this worker so attempts
take the same code path as production workers (see docs/operations.md).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connections

from thinkingbox_web.celery import app

log = logging.getLogger(__name__)


def broker_is_embedded() -> bool:
    return str(settings.CELERY_BROKER_URL).startswith("filesystem://")


def tasks_run_inline() -> bool:
    """Celery's eager mode runs each task inside .delay(): no worker is needed (or useful)."""
    return bool(app.conf.task_always_eager)


def worker_command(
    *, concurrency: int, hostname: str, pool: str = "prefork", beat: bool = False
) -> list[str]:
    """The embedded worker's command line (with ``beat``, it also sends the periodic tasks)."""
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "thinkingbox_web",
        "worker",
        f"--pool={pool}",
        f"--concurrency={concurrency}",
        "--loglevel=WARNING",
        "--without-gossip",
        "--without-mingle",
        "--hostname",
        hostname,
    ]
    if beat:
        command += ["--beat", "--schedule", str(Path(settings.DATA_DIR) / "celerybeat-schedule")]
    return command


def _start(command: list[str], log_file: Path | None) -> subprocess.Popen:
    log_path = log_file or Path(settings.DATA_DIR) / "embedded-worker.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as handle:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            command,
            cwd=Path(settings.BASE_DIR),
            env=os.environ.copy(),
            stdout=handle,
            stderr=subprocess.STDOUT,
        )


class SupervisedWorker:
    """The embedded worker, started again whenever it exits without being asked to.

    With the embedded broker nothing else would notice a dead worker: its campaigns would stay
    running with nobody to run them. ``on_exit(hostname=…)`` runs as soon as the worker is seen
    dead (the demo forgets its heartbeat there, so pages say no worker is alive until the new
    one is ready); a worker that keeps dying is started again after a growing pause.
    """

    def __init__(
        self,
        *,
        concurrency: int = 2,
        pool: str = "prefork",
        beat: bool = False,
        log_file: Path | None = None,
        on_exit: Callable[..., object] | None = None,
        restart_delay_s: float = 1.0,
        max_restart_delay_s: float = 30.0,
    ):
        import socket  # noqa: PLC0415 — only to name the worker as Celery would (%h)

        self.hostname = f"embedded-{os.getpid()}@{socket.gethostname()}"
        self.command = worker_command(concurrency=concurrency, hostname=self.hostname, pool=pool, beat=beat)
        self.log_file = log_file
        self.on_exit = on_exit
        self.restart_delay_s = restart_delay_s
        self.max_restart_delay_s = max_restart_delay_s
        self.restarts = 0
        self.process: subprocess.Popen | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        process = self.process
        return process.pid if process is not None else None

    def alive(self) -> bool:
        process = self.process
        return process is not None and process.poll() is None

    def start(self) -> SupervisedWorker:
        with self._lock:
            self.process = _start(self.command, self.log_file)
        self._watcher = threading.Thread(
            target=self._watch, name="tb-embedded-worker-supervisor", daemon=True
        )
        self._watcher.start()
        return self

    def _watch(self) -> None:
        next_delay = self.restart_delay_s
        while not self._stopping.is_set():
            process = self.process
            assert process is not None
            started = time.monotonic()
            code = process.wait()
            if self._stopping.is_set():
                return
            log.warning("embedded worker %s exited with code %s; starting it again", process.pid, code)
            if self.on_exit is not None:
                try:
                    self.on_exit(hostname=self.hostname)
                except Exception:  # the restart matters more than the bookkeeping
                    log.exception("embedded worker: on_exit failed")
                finally:
                    connections.close_all()  # this thread's own, if on_exit opened one
            # One that ran a while gets the short pause again; one that keeps dying at once, a growing one.
            delay = self.restart_delay_s if time.monotonic() - started > 60 else next_delay
            next_delay = min(delay * 2, self.max_restart_delay_s)
            if self._stopping.wait(delay):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                self.process = _start(self.command, self.log_file)
                self.restarts += 1

    def stop(self, *, timeout: float = 20.0) -> None:
        self._stopping.set()
        with self._lock:
            process = self.process
        if process is not None:
            stop_worker(process, timeout=timeout)
        if self._watcher is not None:
            self._watcher.join(timeout=5)


def stop_worker(process: subprocess.Popen, *, timeout: float = 20.0) -> None:
    """Warm shutdown (SIGTERM lets running attempts finish), then kill if it hangs."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
