"""Worker-side details of the Celery task: trusted connections skip the health check, once."""

from __future__ import annotations

import time

import pytest
from django.db import OperationalError, connection

from apps.campaigns import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_trust():
    tasks._thread.ok_at = None
    yield
    tasks._thread.ok_at = None


def test_connection_that_just_served_a_task_skips_the_health_check():
    connection.ensure_connection()
    assert tasks._drop_stale_connections() is False  # nothing served yet: Django checks as usual

    tasks._connection_served()
    assert tasks._drop_stale_connections() is True
    assert connection.health_check_done is True

    tasks._thread.ok_at = time.monotonic() - tasks.TRUSTED_FOR_S - 1
    assert tasks._drop_stale_connections() is False


def test_no_trust_after_a_database_error():
    connection.ensure_connection()
    connection.errors_occurred = True
    try:
        tasks._connection_served()
        assert tasks._thread.ok_at is None
    finally:
        connection.errors_occurred = False


def test_a_trusted_connection_that_died_gets_one_retry_on_a_fresh_one(monkeypatch):
    calls = []

    def flaky(*, attempt_id):
        calls.append(attempt_id)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return "done"

    monkeypatch.setattr(tasks.services, "attempt_execute", flaky)
    connection.ensure_connection()
    tasks._connection_served()

    assert tasks.execute_attempt.run(7) == "done"
    assert calls == [7, 7]


def test_an_untrusted_connection_error_is_not_retried(monkeypatch):
    def broken(*, attempt_id):
        raise OperationalError("database is down")

    monkeypatch.setattr(tasks.services, "attempt_execute", broken)
    with pytest.raises(OperationalError):
        tasks.execute_attempt.run(7)


def test_threads_pool_opens_every_threads_connection_at_start(monkeypatch):
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from apps.campaigns import hotpath, signals

    warmed = []
    monkeypatch.setattr(hotpath, "warm_connection", lambda conn: warmed.append(threading.get_ident()))
    executor = ThreadPoolExecutor(max_workers=4)
    try:
        signals._connect_pool_threads(
            sender=SimpleNamespace(pool=SimpleNamespace(executor=executor, limit=4))
        )
        executor.submit(lambda: None).result(timeout=10)  # queued behind the four warm-ups
        assert len(executor._threads) == 4
        assert len(set(warmed)) == 4  # every thread (and so its own connection) warmed
    finally:
        executor.shutdown(wait=True)


@pytest.mark.parametrize(
    "sender",
    [
        None,
        "prefork",  # a pool without an executor
        "one-thread",  # a threads pool of one: nothing to open ahead of its only thread
    ],
)
def test_other_pools_are_left_alone(monkeypatch, sender):
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from apps.campaigns import hotpath, signals

    warmed = []
    monkeypatch.setattr(hotpath, "warm_connection", lambda conn: warmed.append(conn))
    executor = ThreadPoolExecutor(max_workers=1)
    senders = {
        None: None,
        "prefork": SimpleNamespace(pool=SimpleNamespace(limit=2)),
        "one-thread": SimpleNamespace(pool=SimpleNamespace(executor=executor, limit=1)),
    }
    try:
        signals._connect_pool_threads(sender=senders[sender])
        executor.submit(lambda: None).result(timeout=10)
        assert (warmed, len(executor._threads)) == ([], 1)  # only the probe's thread; nothing warmed
    finally:
        executor.shutdown(wait=True)
