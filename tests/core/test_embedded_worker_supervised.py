"""The demo's embedded worker: a bad broker file does not stop it, and a killed one is started again.

Runs in a fresh process on its own data folder (SQLite + the filesystem broker), as `demo` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import django, json, os, signal, time
django.setup()
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from apps.core.models import WorkerHeartbeat
from apps.core.services import worker_heartbeat_forget
from thinkingbox_web.celery import app
from thinkingbox_web.embedded import SupervisedWorker

call_command("migrate", verbosity=0)
queue = settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]
with open(os.path.join(queue, "0_truncated.celery.msg"), "w") as bad:
    bad.write('{"body": "eyJ0YXNr')  # a message cut mid-write, first in line


def wait(predicate, what, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def page_line():
    client = Client()
    client.force_login(User.objects.get(username="ops"))
    response = client.get("/campaigns/", HTTP_HOST="127.0.0.1")
    body = response.content.decode()
    if response.status_code != 200:
        raise SystemExit(f"campaigns page: {response.status_code} {body[:300]}")
    return "0 workers alive" in body, "1 worker alive" in body


User.objects.create_user("ops", password="x", is_staff=True, is_superuser=True)
worker = SupervisedWorker(pool="threads", concurrency=1, on_exit=worker_heartbeat_forget, restart_delay_s=2).start()
try:
    wait(lambda: WorkerHeartbeat.alive_count() == 1, "the worker to be ready")
    first = worker.pid
    app.send_task("core.record_heartbeat")  # queued behind the bad file
    wait(lambda: WorkerHeartbeat.objects.get().beats == 2, "the heartbeat task to run")
    survived = worker.pid == first and worker.restarts == 0
    page_alive = page_line()
    os.kill(first, signal.SIGKILL)
    wait(lambda: WorkerHeartbeat.alive_count() == 0, "the dead worker to be forgotten")
    page_dead = page_line()
    wait(lambda: WorkerHeartbeat.alive_count() == 1, "the worker to be started again")
    print(json.dumps({
        "survived_bad_file": survived,
        "rejected": sorted(os.listdir(settings.CELERY_BROKER_TRANSPORT_OPTIONS["rejected_folder"])),
        "page_alive": page_alive,
        "page_dead": page_dead,
        "restarts": worker.restarts,
        "new_pid": worker.pid != first and worker.alive(),
    }))
finally:
    worker.stop()
"""


def test_embedded_worker_survives_a_bad_message_and_is_restarted_when_killed(tmp_path):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(PROJECT_ROOT),
        "DJANGO_SETTINGS_MODULE": "thinkingbox_web.settings",
        "TB_DATA_DIR": str(tmp_path / "data"),
        "DEBUG": "1",
    }
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=400
    )
    log = (tmp_path / "data" / "embedded-worker.log").read_text() if result.returncode else ""
    assert result.returncode == 0, result.stderr[-3000:] + log[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {
        "survived_bad_file": True,
        "rejected": ["0_truncated.celery.msg"],
        "page_alive": [False, True],
        "page_dead": [True, False],
        "restarts": 1,
        "new_pid": True,
    }
