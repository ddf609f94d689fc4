"""Health checks behind /healthz: each returns {"ok": bool, "detail": str}."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError, connections

from thinkingbox_web.celery import app

BROKER_TIMEOUT_SECONDS = 2.0


def check_database(alias: str = "default") -> dict:
    """Run SELECT 1 on the database."""
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}".strip()}
    return {"ok": True, "detail": connections[alias].vendor}


def check_broker() -> dict:
    """Open a connection to the Celery broker (skipped for the embedded filesystem broker)."""
    try:
        with app.connection_for_write() as connection:
            # celery-types declare `timeout: int | None`; kombu takes seconds as a float (it sums sleeps).
            connection.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)  # type: ignore[arg-type]
    except Exception as exc:  # kombu raises transport-specific errors; any of them means "down"
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}".strip()}
    return {"ok": True, "detail": app.connection_for_write().transport_cls}


def run_checks() -> dict[str, dict]:
    """All checks that apply to this deployment, by name."""
    checks = {"database": check_database()}
    if not settings.CELERY_BROKER_IS_FILESYSTEM:
        checks["broker"] = check_broker()
    return checks
