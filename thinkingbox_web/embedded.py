"""The embedded mode's worker: a real Celery worker process on the filesystem broker.

With no broker configured, ``demo`` and ``run_campaign --wait`` start this worker so attempts
take the same code path as production workers (see docs/operations.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from thinkingbox_web.celery import app


def broker_is_embedded() -> bool:
    return str(settings.CELERY_BROKER_URL).startswith("filesystem://")


def tasks_run_inline() -> bool:
    """Celery's eager mode runs each task inside .delay(): no worker is needed (or useful)."""
    return bool(app.conf.task_always_eager)


def start_embedded_worker(*, concurrency: int = 2, log_file: Path | None = None) -> subprocess.Popen:
    """Start a Celery worker subprocess with this process's settings; the caller stops it."""
    base_dir = Path(settings.BASE_DIR)
    log_path = log_file or Path(settings.DATA_DIR) / "embedded-worker.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "thinkingbox_web",
        "worker",
        f"--concurrency={concurrency}",
        "--loglevel=WARNING",
        "--without-gossip",
        "--without-mingle",
        "--hostname",
        f"embedded-{os.getpid()}@%h",
    ]
    handle = open(log_path, "ab")
    return subprocess.Popen(
        command, cwd=base_dir, env=os.environ.copy(), stdout=handle, stderr=subprocess.STDOUT
    )


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
