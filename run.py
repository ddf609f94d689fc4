#!/usr/bin/env python3
"""Bootstrap and run ThinkingBox Web with nothing but Python >= 3.11 (standard library only).

    python3 run.py demo [demo options]   set up .venv, migrate, create the demo, serve on 127.0.0.1:8000
                                          with debug off (--debug: Django's debug pages)
    python3 run.py test [pytest options] set up .venv, run the whole suite on SQLite, then the
                                          integration subset on PostgreSQL + Redis + a live worker
                                          (both with the real ThinkingBox servers' venv, built once)
    python3 run.py check                  set up .venv, run ruff (lint + format), mypy and the
                                          import-layer contracts (CI runs it before the tests)

Set TB_USE_CURRENT_PYTHON=1 to skip the .venv and use the interpreter running this script (for
images or machines where the dependencies are already installed).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV_DIR = ROOT / ".venv"
INSTALL_STAMP = VENV_DIR / ".thinkingbox-install"
LOCAL_WHEELS = Path("/opt/wheels")  # the machine's CPU torch wheel (pyproject: training extra)
PYTEST_NO_TESTS_COLLECTED = 5
SERVICE_START_TIMEOUT_SECONDS = 60
POSTGRES_LIB_DIR = Path("/usr/lib/postgresql")  # Debian keeps initdb/pg_ctl off PATH, in here


class ServiceUnavailable(Exception):
    """A throwaway PostgreSQL or Redis could not be started (the reason is the message)."""


def say(message: str) -> None:
    print(f"[run.py] {message}", flush=True)


# --- Bootstrap ---------------------------------------------------------------------------------


def venv_python() -> Path:
    return VENV_DIR / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def install_fingerprint() -> str:
    """Hash of the files that decide what gets installed; a change triggers a reinstall."""
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "constraints.txt"):
        path = ROOT / name
        digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()


def bootstrap() -> str:
    """Return the Python to run the project with, creating and filling .venv when needed."""
    if sys.version_info < (3, 11):
        sys.exit(f"ThinkingBox Web needs Python >= 3.11, this is {sys.version.split()[0]}")
    if os.environ.get("TB_USE_CURRENT_PYTHON") == "1":
        return sys.executable
    python = venv_python()
    if not python.exists():
        say(f"creating virtual environment in {VENV_DIR}")
        result = subprocess.run([sys.executable, "-m", "venv", str(VENV_DIR)])
        if result.returncode != 0:
            sys.exit("could not create .venv (on Debian/Ubuntu: apt-get install python3-venv)")
    fingerprint = install_fingerprint()
    if not INSTALL_STAMP.exists() or INSTALL_STAMP.read_text() != fingerprint:
        say(
            "installing the project and its dev and training extras into .venv (first run takes a few minutes)"
        )
        command = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        check_call([*command, "--upgrade", "pip"])
        # torch: the CPU wheel kept on the machine, never the multi-GB CUDA build from the index
        wheels = ["--find-links", str(LOCAL_WHEELS)] if LOCAL_WHEELS.is_dir() else []
        check_call([*command, *wheels, "-c", "constraints.txt", "-e", ".[dev,training]"])
        INSTALL_STAMP.write_text(fingerprint)
    return str(python)


def check_call(command: list[str], **kwargs) -> None:
    result = subprocess.run(command, cwd=ROOT, **kwargs)
    if result.returncode != 0:
        sys.exit(f"command failed ({result.returncode}): {shlex.join(command)}")


# --- demo --------------------------------------------------------------------------------------


def command_demo(python: str, args: list[str]) -> int:
    """The demo serves with debug off (plain error pages, static files through WhiteNoise); `--debug`
    keeps Django's debug pages for development."""
    debug = "--debug" in args
    args = [arg for arg in args if arg != "--debug"]
    os.environ.update({"TB_DEMO": "1", "DEBUG": "1" if debug else "0"})
    check_call([python, "manage.py", "migrate", "--noinput"])
    try:
        return subprocess.run([python, "manage.py", "demo", *args], cwd=ROOT).returncode
    except KeyboardInterrupt:
        return 0


# --- throwaway services for the integration run -----------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def find_postgres_binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(POSTGRES_LIB_DIR.glob(f"*/bin/{name}"), key=lambda p: p.parts[-3], reverse=True)
    if candidates:
        return str(candidates[0])
    raise ServiceUnavailable(
        f"PostgreSQL binary {name!r} not found (install postgresql or set TEST_DATABASE_URL)"
    )


class ThrowawayPostgres:
    """A private PostgreSQL cluster in a temp folder on a free 127.0.0.1 port, deleted afterwards."""

    def __init__(self) -> None:
        self.base: Path | None = None
        self.run_as: list[str] = []
        self.pg_ctl = ""

    def start(self) -> str:
        initdb = find_postgres_binary("initdb")
        self.pg_ctl = find_postgres_binary("pg_ctl")
        self.base = Path(tempfile.mkdtemp(prefix="tb-pg-"))
        if os.geteuid() == 0:
            # initdb refuses to run as root: hand the folder to the postgres user and run as it.
            import pwd

            try:
                postgres_user = pwd.getpwnam("postgres")
            except KeyError:
                raise ServiceUnavailable(
                    "running as root and there is no 'postgres' user to run initdb"
                ) from None
            os.chown(self.base, postgres_user.pw_uid, postgres_user.pw_gid)
            runuser = shutil.which("runuser")
            self.run_as = [runuser, "-u", "postgres", "--"] if runuser else ["sudo", "-u", "postgres"]
        data = self.base / "data"
        port = free_port()
        self._run(
            [initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"], "initdb"
        )
        # Durability is pointless for a throwaway test cluster; turning it off makes tests faster.
        server_options = (
            f"-p {port} -k {self.base} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            [
                self.pg_ctl,
                "-D",
                str(data),
                "-l",
                str(self.base / "server.log"),
                "-w",
                "-t",
                str(SERVICE_START_TIMEOUT_SECONDS),
                "-o",
                server_options,
                "start",
            ],
            "pg_ctl start",
        )
        return f"postgres://postgres@127.0.0.1:{port}/postgres"

    def _run(self, command: list[str], what: str) -> None:
        result = subprocess.run([*self.run_as, *command], cwd=self.base, capture_output=True, text=True)
        if result.returncode != 0:
            log = self.base / "server.log"
            details = (result.stderr or result.stdout).strip()
            if log.exists():
                details += "\n" + log.read_text(errors="replace")[-2000:]
            raise ServiceUnavailable(f"{what} failed: {details}")

    def stop(self) -> None:
        if self.base is None:
            return
        data = self.base / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [*self.run_as, self.pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
                cwd=self.base,
                capture_output=True,
            )
        shutil.rmtree(self.base, ignore_errors=True)


class ThrowawayRedis:
    """A redis-server on a free 127.0.0.1 port with persistence off, stopped afterwards."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.port: int | None = None

    def start(self) -> str:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceUnavailable("redis-server not found (install redis-server or set TEST_REDIS_URL)")
        port = self.port = free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="tb-redis-"))
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
                "--daemonize",
                "no",
            ],
            stdout=(self.workdir / "redis.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + SERVICE_START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = (self.workdir / "redis.log").read_text(errors="replace")[-2000:]
                raise ServiceUnavailable(f"redis-server exited: {log}")
            if redis_answers_ping("127.0.0.1", port):
                return f"redis://127.0.0.1:{port}/0"
            time.sleep(0.1)
        raise ServiceUnavailable(f"redis-server did not answer on port {port}")

    def stop(self) -> None:
        """Stop the server we started and any server a test restarted on our port (the broker-outage
        test starts a daemonized redis-server there, which is no child of ours)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        if self.port is not None:
            deadline = time.monotonic() + SERVICE_START_TIMEOUT_SECONDS
            while redis_answers_ping("127.0.0.1", self.port) and time.monotonic() < deadline:
                redis_shutdown("127.0.0.1", self.port)
                time.sleep(0.1)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def redis_shutdown(host: str, port: int) -> None:
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(b"SHUTDOWN NOSAVE\r\n")
            sock.recv(16)  # the server closes the connection as it exits
    except OSError:
        pass


def redis_answers_ping(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


# --- test --------------------------------------------------------------------------------------


@dataclass
class RunResult:
    label: str
    exit_code: int
    passed: int = 0
    failed: int = 0
    skipped: int = 0


def count_junit(path: Path) -> tuple[int, int, int]:
    """(passed, failed incl. errors, skipped) from a pytest JUnit XML report."""
    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = failed = skipped = 0
    for suite in suites:
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def run_pytest(python: str, label: str, args: list[str], env: dict[str, str], report_dir: Path) -> RunResult:
    report = report_dir / f"{label}.xml"
    say(f"{label}: pytest {shlex.join(args)}")
    exit_code = subprocess.run(
        [python, "-m", "pytest", f"--junitxml={report}", *args], cwd=ROOT, env=env
    ).returncode
    result = RunResult(label, exit_code)
    if report.exists():
        result.passed, result.failed, result.skipped = count_junit(report)
    if exit_code == PYTEST_NO_TESTS_COLLECTED:
        say(f"{label}: no tests ran (pytest exit code 5) - counted as a failure")
    elif exit_code != 0 and result.failed == 0:
        result.failed = 1  # pytest itself failed (usage or internal error) without a test failure
    return result


def base_test_env(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)
    env.update({"DEBUG": "1", "TB_DATA_DIR": str(data_dir), "PYTHONDONTWRITEBYTECODE": "1"})
    # Tests reach their scripted servers on loopback, which the outbound policy refuses by default.
    env.setdefault("TB_OUTBOUND_ALLOWED_HOSTS", "*,127.0.0.1,localhost,::1")
    return env


def start_integration_services(stack: list) -> tuple[str, str]:
    """PostgreSQL and Redis URLs from TEST_DATABASE_URL / TEST_REDIS_URL, or throwaway servers."""
    database_url = os.environ.get("TEST_DATABASE_URL")
    if not database_url:
        postgres = ThrowawayPostgres()
        stack.append(postgres)
        say("starting a throwaway PostgreSQL")
        database_url = postgres.start()
    redis_url = os.environ.get("TEST_REDIS_URL")
    if not redis_url:
        redis = ThrowawayRedis()
        stack.append(redis)
        say("starting a throwaway Redis")
        redis_url = redis.start()
    return database_url, redis_url


def servers_python(python: str) -> tuple[str, str]:
    """(interpreter, "") of the real ThinkingBox servers' venv, or ("", why not).

    TB_SERVERS_PYTHON when set, else the venv tests/support/servers_venv.py builds once under its
    cache folder (reused while the servers' files are unchanged) from a temporary copy of
    ../shared/thinkingbox/servers. Both test runs then use it; without it the real-server tests
    skip with the reason (on CI they fail).
    """
    configured = os.environ.get("TB_SERVERS_PYTHON")
    if configured:
        return configured, ""
    say("finding or building the ThinkingBox servers' venv (tests/support/servers_venv.py)")
    result = subprocess.run(
        [python, "-m", "tests.support.servers_venv"], cwd=ROOT, capture_output=True, text=True
    )
    if result.returncode == 0 and result.stdout.strip():
        return result.stdout.strip().splitlines()[-1], ""
    return "", (result.stderr or result.stdout).strip()[-1000:]


def stop_on_sigterm(signum, frame) -> None:
    """SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so the services we started are stopped."""
    raise KeyboardInterrupt(f"signal {signum}")


def command_test(python: str, args: list[str]) -> int:
    results: list[RunResult] = []
    integration_skipped_reason = ""
    servers, servers_missing = servers_python(python)
    if servers:
        os.environ["TB_SERVERS_PYTHON"] = servers  # base_test_env copies it into both runs
    with tempfile.TemporaryDirectory(prefix="tb-test-") as scratch:
        scratch_dir = Path(scratch)
        sqlite_env = base_test_env(scratch_dir / "data-sqlite")
        results.append(run_pytest(python, "sqlite", list(args), sqlite_env, scratch_dir))

        services: list = []
        previous_sigterm = signal.signal(signal.SIGTERM, stop_on_sigterm)
        try:
            try:
                database_url, redis_url = start_integration_services(services)
            except ServiceUnavailable as exc:
                integration_skipped_reason = str(exc)
            else:
                integration_env = base_test_env(scratch_dir / "data-integration")
                integration_env.update(
                    {
                        "DATABASE_URL": database_url,
                        "CELERY_BROKER_URL": redis_url,
                        # Own queue per run, so a shared Redis never hands our tasks to someone else's worker.
                        "CELERY_TASK_DEFAULT_QUEUE": f"tbtest-{uuid.uuid4().hex[:10]}",
                    }
                )
                results.append(
                    run_pytest(
                        python, "integration", ["-m", "integration", *args], integration_env, scratch_dir
                    )
                )
        finally:
            # On success, failure, Ctrl-C (KeyboardInterrupt) and SIGTERM (stop_on_sigterm) alike.
            for service in reversed(services):
                service.stop()
            signal.signal(signal.SIGTERM, previous_sigterm)

    ci = os.environ.get("CI", "").lower() == "true"
    failed_runs = [r.label for r in results if r.exit_code != 0]
    for result in results:
        say(
            f"{result.label}: {result.passed} passed, {result.failed} failed, {result.skipped} skipped "
            f"(exit code {result.exit_code})"
        )
    if integration_skipped_reason:
        print(f"integration subset SKIPPED: {integration_skipped_reason}", flush=True)
        if ci:
            failed_runs.append("integration (skipped on CI)")
    if servers_missing:
        print(f"real ThinkingBox server tests SKIPPED: {servers_missing}", flush=True)
        if ci:
            failed_runs.append("real ThinkingBox servers (unavailable on CI)")
    print(f"{sum(r.passed for r in results)} passed, {sum(r.failed for r in results)} failed", flush=True)
    if failed_runs:
        say(f"FAILED: {', '.join(failed_runs)}")
        return 1
    return 0


# --- check ---------------------------------------------------------------------------------------

# Each check is (what it guards, command); all run even when one fails, so one pass shows every problem.
STATIC_CHECKS = (
    ("lint", ["-m", "ruff", "check", "."]),
    ("format", ["-m", "ruff", "format", "--check", "."]),
    ("types", ["-m", "mypy"]),
    (
        "import layers",
        [
            "-c",
            "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())",
            "--no-cache",
        ],
    ),
)


def command_check(python: str, args: list[str]) -> int:
    failed = []
    for label, command in STATIC_CHECKS:
        say(f"check: {label}")
        if subprocess.run([python, *command, *args], cwd=ROOT).returncode != 0:
            failed.append(label)
    if failed:
        say(f"FAILED checks: {', '.join(failed)}")
        return 1
    say("all checks passed")
    return 0


COMMANDS = {"demo": command_demo, "test": command_test, "check": command_check}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(__doc__)
        return 2
    command, args = argv[0], argv[1:]
    python = bootstrap()
    return COMMANDS[command](python, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
