"""Shared test fixtures: personas, inline Celery for unit tests, and a live worker for integration.

Personas (healthchecks-style): alice = operator in team A, bob = viewer in team A,
trish = triager in team A, charlie = signed in but no team and no role, erin = viewer in team B.

Integration tests (@pytest.mark.integration) run only when the database is PostgreSQL and the
Celery broker is Redis (`python3 run.py test` arranges both); elsewhere they are skipped with
the reason. They use `celery_worker_process`, a real `celery worker` subprocess pointed at
pytest-django's test database, and need @pytest.mark.django_db(transaction=True) so the worker
sees committed rows.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Tests talk to servers on loopback (scripted model servers, MCP and env servers): the test
# configuration allows it explicitly, as an operator would list an internal host; a deployment's
# default refuses loopback (tb_engine.llm.outbound). Set before the live worker copies the environment.
TEST_OUTBOUND_ALLOWED_HOSTS = "*,127.0.0.1,localhost,::1"
os.environ.setdefault("TB_OUTBOUND_ALLOWED_HOSTS", TEST_OUTBOUND_ALLOWED_HOSTS)
WORKER_READY_TIMEOUT_SECONDS = 90


def integration_run_active() -> tuple[bool, str]:
    """Whether this session can run integration tests, and why not if it cannot."""
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"]
    if engine != "django.db.backends.postgresql":
        return False, f"integration tests need PostgreSQL (DATABASE_URL), database engine is {engine}"
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith(("redis://", "rediss://")):
        return (
            False,
            f"integration tests need a Redis broker (CELERY_BROKER_URL), broker is {broker.split(':')[0]}",
        )
    return True, ""


def django_enabled(config) -> bool:
    """False for engine-only runs (`-p no:django`), where nothing here may touch Django."""
    return config.pluginmanager.hasplugin("django")


def pytest_configure(config):
    if not django_enabled(config):
        return
    from django.conf import settings

    # pytest-django may have read the settings before this file set the variable.
    settings.OUTBOUND_ALLOWED_HOSTS = os.environ["TB_OUTBOUND_ALLOWED_HOSTS"].split(",")


def pytest_collection_modifyitems(config, items):
    if not django_enabled(config):
        return
    active, reason = integration_run_active()
    if active:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker("integration"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _celery_runs_inline(request):
    """Outside integration tests, .delay() runs the task in-process and never touches a broker."""
    if not django_enabled(request.config) or request.node.get_closest_marker("integration"):
        yield
        return
    from thinkingbox_web.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@pytest.fixture(autouse=True)
def _fresh_rate_limits(request):
    """Sign-in and API counts start at zero in every test (apps.core.rate_limits), so many tests that
    sign in or call the API never trip a limit that another test filled."""
    if not django_enabled(request.config):
        yield
        return
    from django.core.cache import caches

    limits = caches["rate-limits"]
    # Only this process's memory: a Redis-backed limits cache (TB_RATE_LIMIT_CACHE_URL) is never flushed.
    if limits.__class__.__name__ == "LocMemCache":
        limits.clear()
    yield


@pytest.fixture(autouse=True)
def _fresh_process_figures(request):
    """Every test starts like a fresh server process: no figures in this process's memory
    (apps.figures.tables.process_figures), only what the test database stores."""
    if django_enabled(request.config):
        from apps.figures.tables import forget_process_figures

        forget_process_figures()
    yield


# --- Personas -------------------------------------------------------------------------------


@pytest.fixture
def make_user(db):
    """Factory: make_user("name", role="viewer", teams=[team]) -> User."""
    from django.contrib.auth import get_user_model

    from apps.core.services import assign_role

    def make(username: str, *, role: str | None = None, teams=(), **fields):
        user = get_user_model().objects.create_user(username=username, password=f"{username}-pw", **fields)
        if role:
            assign_role(user=user, role=role)
        for team in teams:
            team.members.add(user)
        return user

    return make


@pytest.fixture
def team_a(db):
    from apps.core.services import team_create

    return team_create(name="Team A")


@pytest.fixture
def team_b(db):
    from apps.core.services import team_create

    return team_create(name="Team B")


@pytest.fixture
def alice(make_user, team_a):
    return make_user("alice", role="operator", teams=[team_a])


@pytest.fixture
def bob(make_user, team_a):
    return make_user("bob", role="viewer", teams=[team_a])


@pytest.fixture
def trish(make_user, team_a):
    return make_user("trish", role="triager", teams=[team_a])


@pytest.fixture
def charlie(make_user):
    return make_user("charlie")


@pytest.fixture
def erin(make_user, team_b):
    return make_user("erin", role="viewer", teams=[team_b])


@pytest.fixture
def admin_user_persona(make_user):
    return make_user("ada", role="admin")


# --- Live Celery worker (integration) ---------------------------------------------------------


def database_url_for(settings_dict: dict) -> str:
    """postgres:// URL for a Django connection settings dict (used to point the worker at it)."""
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or "5432"
    return f"postgres://{credentials}{host}:{port}/{quote(settings_dict['NAME'], safe='')}"


def reset_broker_connections() -> None:
    """Drop this process's pooled broker connections (after a broker restart) so new ones are made."""
    from kombu import pools

    from thinkingbox_web.celery import app

    pools.reset()  # closes every pooled connection and forgets the pools (kombu keeps them globally)
    app._pool = None  # the app then builds fresh pools on demand
    app.amqp._producer_pool = None


class CeleryWorkerProcess:
    """A real `celery -A thinkingbox_web worker` subprocess that a test can kill and restart."""

    def __init__(
        self, *, env: dict[str, str], queue: str, log_path: Path, pool: str = "prefork", concurrency: int = 2
    ):
        self.env = env
        self.queue = queue
        self.log_path = log_path
        self.pool = pool
        self.concurrency = concurrency
        self.nodename = f"tbtest-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
        self.process: subprocess.Popen | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the worker and wait until it answers a ping."""
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "thinkingbox_web",
            "worker",
            "--pool",
            self.pool,
            "--concurrency",
            str(self.concurrency),
            "--queues",
            self.queue,
            "--hostname",
            self.nodename,
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
        ]
        log = self.log_path.open("ab")
        # Own process group, so kill() takes the prefork children down too, like a machine crash.
        self.process = subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.wait_ready()

    def wait_ready(self, timeout: float = WORKER_READY_TIMEOUT_SECONDS) -> None:
        """Block until the worker replies to a broadcast ping; raise with its log if it does not."""
        from thinkingbox_web.celery import app

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(
                    f"celery worker exited early (code {self.process.returncode}):\n{self.log_tail()}"
                )
            try:
                if app.control.ping(destination=[self.nodename], timeout=1.0):
                    return
            except app.connection().connection_errors:  # a pooled connection to a restarted broker
                reset_broker_connections()
        raise RuntimeError(f"celery worker not ready after {timeout:.0f}s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the worker and its children (no graceful shutdown, messages stay unacked)."""
        if self.alive:
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)

    def restart(self) -> None:
        """Kill (if running) and start again under the same node name."""
        self.kill()
        self.start()

    def stop(self) -> None:
        """Warm shutdown (SIGTERM), escalating to SIGKILL after 20 s."""
        if not self.alive:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="session")
def _celery_worker_session(django_db_setup, django_db_blocker, tmp_path_factory):
    active, reason = integration_run_active()
    if not active:
        pytest.skip(reason)
    from django.conf import settings
    from django.db import connections

    env = {
        **os.environ,
        # After django_db_setup the connection's NAME is the test database (test_<name>).
        "DATABASE_URL": database_url_for(connections["default"].settings_dict),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_TASK_DEFAULT_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "SECRET_KEY": settings.SECRET_KEY,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "localhost",
        "PYTHONPATH": str(PROJECT_ROOT),
        # Short clocks so retry and cancellation paths finish within a test's patience.
        "TB_ATTEMPT_RETRY_BACKOFF_SECONDS": "1",
        "TB_ATTEMPT_RETRY_BACKOFF_MAX_SECONDS": "2",
        "TB_ATTEMPT_MAX_RETRIES": "2",
        "TB_ATTEMPT_HEARTBEAT_SECONDS": "1",
    }
    worker = CeleryWorkerProcess(
        env=env,
        queue=settings.CELERY_TASK_DEFAULT_QUEUE,
        log_path=tmp_path_factory.mktemp("celery") / "worker.log",
    )
    worker.start()
    yield worker
    # Stop before pytest-django drops the test database, which fails while the worker is connected.
    worker.stop()


@pytest.fixture
def celery_worker_process(_celery_worker_session):
    """A live worker on the test database and Redis broker; .kill(), .restart(), .nodename."""
    if not _celery_worker_session.alive:
        _celery_worker_session.start()
    yield _celery_worker_session
    if not _celery_worker_session.alive:
        # A test that killed the worker must not leave the next one without it.
        _celery_worker_session.start()


# --- The real ThinkingBox MCP servers (tests/support/servers_venv.py) ---------------------------


@pytest.fixture(scope="session")
def servers_python() -> Path:
    """The real servers' interpreter: TB_SERVERS_PYTHON, else a cached venv built on first use.

    Skipped with the reason when neither works — but on CI (CI=true) that fails the test instead.
    """
    from tests.support.servers_venv import ServersUnavailable, on_ci
    from tests.support.servers_venv import servers_python as find_servers_python

    try:
        return find_servers_python()
    except ServersUnavailable as exc:
        if on_ci():
            pytest.fail(f"CI needs the real ThinkingBox servers: {exc}")
        pytest.skip(f"the real ThinkingBox servers are unavailable: {exc}")
