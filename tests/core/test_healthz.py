"""/healthz: database (and non-filesystem broker) checks, 200 when healthy, 503 otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import OperationalError, connections

from thinkingbox_web.celery import app as celery_app

pytestmark = pytest.mark.django_db
HEALTHCHECK_SCRIPT = Path(__file__).resolve().parents[2] / "docker" / "healthcheck.py"


def test_healthz_healthy_database_answers_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": {"ok": True, "detail": "sqlite"}}}


def test_healthz_broken_database_answers_503(client, monkeypatch):
    def refuse_connection(*args, **kwargs):
        raise OperationalError("could not connect to server: Connection refused")

    monkeypatch.setattr(connections["default"], "cursor", refuse_connection)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "error",
        "checks": {
            "database": {
                "ok": False,
                "detail": "OperationalError: could not connect to server: Connection refused",
            }
        },
    }


def test_healthz_unreachable_redis_broker_answers_503(client, settings, monkeypatch):
    # Port 1 on loopback: nothing listens there, so the connection is refused at once.
    settings.CELERY_BROKER_IS_FILESYSTEM = False
    monkeypatch.setattr(celery_app.conf, "broker_url", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(celery_app.conf, "broker_transport", None)  # settings name one for filesystem:// only
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "error"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is False


def test_healthz_filesystem_broker_is_not_checked(client, settings):
    settings.CELERY_BROKER_IS_FILESYSTEM = True
    response = client.get("/healthz")
    assert sorted(response.json()["checks"]) == ["database"]


def test_healthz_needs_no_login_and_is_not_cached(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"]


def test_healthz_is_exempt_from_ssl_redirect_but_pages_are_not(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz").status_code == 200
    response = client.get("/accounts/login/")
    assert response.status_code == 301
    assert response["Location"] == "https://testserver/accounts/login/"


def test_container_healthcheck_script_passes_against_live_healthz(live_server):
    env = {**os.environ, "ALLOWED_HOSTS": "localhost", "HEALTHCHECK_URL": f"{live_server.url}/healthz"}
    result = subprocess.run(
        [sys.executable, str(HEALTHCHECK_SCRIPT)], env=env, capture_output=True, text=True, timeout=30
    )
    assert (result.returncode, result.stderr) == (0, "")


def test_container_healthcheck_script_fails_when_nothing_listens():
    env = {**os.environ, "HEALTHCHECK_URL": "http://127.0.0.1:1/healthz"}
    result = subprocess.run(
        [sys.executable, str(HEALTHCHECK_SCRIPT)], env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1
    assert result.stderr.startswith("healthcheck failed:")
