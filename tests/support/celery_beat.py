"""A real `celery beat` subprocess for integration tests (the scheduler docker compose runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class CeleryBeatProcess:
    """`celery -A thinkingbox_web beat` with its schedule file in `workdir`; stop() ends it."""

    def __init__(self, *, env: dict[str, str], workdir: Path):
        self.env = env
        self.workdir = workdir
        self.log_path = workdir / "beat.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "thinkingbox_web",
            "beat",
            "--schedule",
            str(self.workdir / "celerybeat-schedule"),
            "--pidfile",
            "",
            "--loglevel",
            "INFO",
        ]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery beat exited early:\n{self.log_tail()}")
            if "beat: Starting..." in self.log_path.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"celery beat did not start:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
