"""Database connections of a worker that runs many short tasks: drop the broken ones, trust the fresh ones.

Celery's Django fixup closes connections after every task unless told to reuse them
(CELERY_DB_REUSE_MAX); reused, each task first drops broken or expired connections as Django does
per request (close_old_connections). A connection that finished a task less than TRUSTED_FOR_S
ago is trusted without Django's health check, a SELECT 1 round trip before every attempt (about
a tenth of a golden attempt's time); if it had died anyway, the task retries once on a fresh one.

Skipping the check relies on one Django internal, kept in ``_skip_health_check`` alone:
tests/worker/test_connections.py fails if Django stops honouring it.
"""

from __future__ import annotations

import threading
import time

from django.db import close_old_connections, connection, transaction

TRUSTED_FOR_S = 1.0
_thread = threading.local()  # connections are per thread (threads pool), and so is their trust


def drop_stale_connections() -> bool:
    """Close broken or expired connections before a task; whether the health check was skipped.

    Not inside a transaction: an inline (eager) run belongs to its caller's transaction.
    """
    if not transaction.get_autocommit():
        return False
    close_old_connections()
    last_ok = getattr(_thread, "ok_at", None)
    if last_ok is not None and time.monotonic() - last_ok < TRUSTED_FOR_S:
        _skip_health_check(connection)
        return True
    return False


def connection_served() -> None:
    """The task that just ended used this thread's connection without a database error."""
    _thread.ok_at = time.monotonic()


def connection_distrusted() -> None:
    """The trusted connection failed: close it, and trust nothing until a task succeeds again."""
    _thread.ok_at = None
    connection.close()


_release = {"while_waiting": False}


def release_connections_while_waiting(enabled: bool) -> None:
    """Say whether this process's attempts give their connection back while they wait (set at worker start)."""
    _release["while_waiting"] = enabled


def connection_release_while_waiting() -> None:
    """Close this thread's connection if the worker runs many attempts at once.

    A threads-pool worker of 128 attempts waiting on a model would otherwise hold 128 idle
    connections (PostgreSQL's default limit is 100 for the whole server). The claim and the record
    each open one again, about a millisecond and a half against an attempt of several seconds.
    Never inside a transaction: an inline (eager) run belongs to its caller's transaction.
    """
    if _release["while_waiting"] and transaction.get_autocommit() and not connection.in_atomic_block:
        _thread.ok_at = None
        connection.close()


def _skip_health_check(conn) -> None:
    # Django internal: close_old_connections() clears ``health_check_done`` and the next query then
    # runs ``is_usable()`` (SELECT 1) first when CONN_HEALTH_CHECKS is on. Setting it back says the
    # check was done. Django exposes no public switch for one connection, one query.
    conn.health_check_done = True
