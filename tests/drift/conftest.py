"""Drift fixtures: watches on the starter suite, a tick that drains the runs it starts, a local webhook."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.campaigns.conftest import drain, make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import _fresh_cache, run_campaign, summaries_campaign  # noqa: F401 (fixtures)

TASKS = 8  # the first starter tasks by id


@pytest.fixture
def no_dispatch(monkeypatch):
    """Runs' attempts stay queued until drain_runs() executes them here (no nested inline Celery)."""
    from apps.campaigns import services

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)


@pytest.fixture
def watch_tasks(starter_suite):
    return list(starter_suite.tasks.order_by("task_id")[:TASKS])


@pytest.fixture
def make_watch(alice, team_a, starter_suite, watch_tasks, no_dispatch):
    from apps.agents.services import agent_config_for
    from apps.drift.services import watch_create

    def make(agent="sim:steady", *, name="steady watch", n=4, interval_minutes=60, **kwargs):
        return watch_create(
            name=name,
            team=team_a,
            owner=alice,
            agent=agent_config_for(agent) if isinstance(agent, str) else agent,
            suite=starter_suite,
            tasks=watch_tasks,
            n_attempts=n,
            interval_minutes=interval_minutes,
            **kwargs,
        )

    return make


@pytest.fixture
def tick(django_capture_on_commit_callbacks):
    """tick(now=None): one drift tick (its on-commit work, e.g. the webhook, run as after a commit),
    then every attempt of the runs it started is executed."""
    from apps.drift.models import WatchRun
    from apps.drift.services import drift_tick

    def run(now=None):
        with django_capture_on_commit_callbacks(execute=True):
            report = drift_tick(now=now)
        for watch_run in WatchRun.objects.filter(status=WatchRun.Status.RUNNING).select_related("campaign"):
            drain(watch_run.campaign)
        return report

    return run


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.received.append({"headers": dict(self.headers), "body": json.loads(body)})
        self.send_response(self.server.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args):
        return


@pytest.fixture
def webhook_server():
    """A local HTTP server on 127.0.0.1 that records every POST (.received) and answers .status."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.received = []
    server.status = 200
    server.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/drift"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
