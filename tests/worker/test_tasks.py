"""The worker's Celery tasks and start-up signals: trusted connections, one retry, warmed pool threads."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from celery.concurrency.solo import TaskPool as SoloPool
from celery.concurrency.thread import TaskPool as ThreadsPool
from django.db import OperationalError, close_old_connections, connection, transaction

from apps.attempts.services import RUN_ATTEMPT_TASK
from apps.campaigns.services import SWEEP_TASK
from apps.worker import attempts, connections, signals, tasks
from thinkingbox_web.celery import app

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_trust():
    connections._thread.ok_at = None
    yield
    connections._thread.ok_at = None


def test_tasks_are_registered_under_the_names_campaigns_send():
    assert (app.tasks[RUN_ATTEMPT_TASK], app.tasks[SWEEP_TASK]) == (tasks.run_attempt, tasks.sweep)


def test_connection_that_just_served_a_task_is_trusted_for_a_second():
    connection.ensure_connection()
    assert connections.drop_stale_connections() is False  # nothing served yet: Django checks as usual

    connections.connection_served()
    assert connections.drop_stale_connections() is True

    connections._thread.ok_at = time.monotonic() - connections.TRUSTED_FOR_S - 1
    assert connections.drop_stale_connections() is False


def test_django_skips_the_health_check_only_when_told(monkeypatch):
    # Guards the one Django internal the trust relies on (connections._skip_health_check).
    connection.ensure_connection()
    monkeypatch.setattr(connection, "health_check_enabled", True)
    checks = []
    monkeypatch.setattr(connection, "is_usable", lambda: checks.append("SELECT 1") is None)

    close_old_connections()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert checks == ["SELECT 1"]  # after close_old_connections Django checks before the first query

    close_old_connections()
    connections._skip_health_check(connection)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert checks == ["SELECT 1"]  # ...and not when told the check was done


def test_a_trusted_connection_that_died_gets_one_retry_on_a_fresh_one(monkeypatch):
    calls = []

    def flaky(*, attempt_id):
        calls.append(attempt_id)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return "done"

    monkeypatch.setattr(attempts, "attempt_execute", flaky)
    connection.ensure_connection()
    connections.connection_served()

    assert tasks.run_attempt.run(7) == "done"
    assert calls == [7, 7]


def test_an_untrusted_connection_error_is_not_retried_and_leaves_no_trust(monkeypatch):
    calls = []

    def broken(*, attempt_id):
        calls.append(attempt_id)
        raise OperationalError("database is down")

    monkeypatch.setattr(attempts, "attempt_execute", broken)
    with pytest.raises(OperationalError):
        tasks.run_attempt.run(7)
    assert calls == [7]
    assert connections.drop_stale_connections() is False


def test_threads_pool_opens_every_threads_connection_at_start(monkeypatch):
    warmed = []
    monkeypatch.setattr(signals, "attempt_claim_prepare", lambda: warmed.append(threading.get_ident()))
    pool = ThreadsPool(limit=4)
    pool.start()
    try:
        signals._connect_pool_threads(sender=SimpleNamespace(pool=pool))
        done = threading.Event()
        pool.apply_async(done.set, callback=lambda _: None)  # queued behind the four warm-ups
        assert done.wait(timeout=10)
        assert len(warmed) == 4
        assert len(set(warmed)) == 4  # every thread (and so its own connection) warmed
    finally:
        pool.stop()


def test_other_pools_and_single_threads_are_left_alone(monkeypatch, settings):
    warmed = []
    monkeypatch.setattr(signals, "attempt_claim_prepare", lambda: warmed.append(threading.get_ident()))

    signals._connect_pool_threads(sender=SimpleNamespace(pool=SoloPool(limit=1)))
    signals._connect_pool_threads(sender=None)
    signals._connect_pool_threads(sender=SimpleNamespace(pool=ThreadsPool(limit=1)))
    settings.WORKER_CONNECT_THREADS = False
    signals._connect_pool_threads(sender=SimpleNamespace(pool=ThreadsPool(limit=4)))

    assert warmed == []


def test_a_many_threads_worker_gives_its_connection_back_while_attempts_wait(monkeypatch):
    closed = []
    monkeypatch.setattr(connection, "close", lambda: closed.append("closed"))
    connections.release_connections_while_waiting(True)
    try:
        connections.connection_served()
        connections.connection_release_while_waiting()
        assert (closed, connections._thread.ok_at) == (["closed"], None)

        with transaction.atomic():  # an inline run inside its caller's transaction keeps it
            connections.connection_release_while_waiting()
        assert closed == ["closed"]
    finally:
        connections.release_connections_while_waiting(False)
    connections.connection_release_while_waiting()
    assert closed == ["closed"]  # a worker of few threads keeps its connection


def test_the_release_follows_the_pool_size(settings):
    settings.WORKER_HOLD_CONNECTIONS_UP_TO = 16
    try:
        for pool, released in (
            (ThreadsPool(limit=17), True),
            (ThreadsPool(limit=16), False),
            (SoloPool(), False),
        ):
            signals._release_connections_of_many_attempts(sender=SimpleNamespace(pool=pool))
            assert connections._release["while_waiting"] is released
    finally:
        connections.release_connections_while_waiting(False)
