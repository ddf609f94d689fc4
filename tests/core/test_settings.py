"""Settings come from the environment: parsing helpers directly, the whole module via subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from thinkingbox_web.env import database_config, read_bool, read_int, read_list, secret_key

PROJECT_ROOT = Path(__file__).resolve().parents[2]
REAL_LOOKING_SECRET = "k3Jd9-xQ_2mZ7vLp0aR8sT4wY6uE1oI5nB3cV7xZ9qW2eR4tY6uI8oP0aS2dF4gH"


def test_database_config_postgres_url_is_parsed():
    config = database_config("postgres://tb:s%40cret@db.internal:6432/thinkingbox", Path("/unused"))
    assert {key: config[key] for key in ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT")} == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "thinkingbox",
        "USER": "tb",
        "PASSWORD": "s@cret",
        "HOST": "db.internal",
        "PORT": 6432,
    }


def test_database_config_default_is_sqlite_file_in_data_dir(tmp_path):
    config = database_config(None, tmp_path)
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(tmp_path / "db.sqlite3")


def test_database_config_unsupported_scheme_names_the_variable():
    with pytest.raises(ImproperlyConfigured) as excinfo:
        database_config("mysql://u:p@h/db", Path("/unused"))
    assert str(excinfo.value).startswith("environment variable DATABASE_URL: unsupported scheme 'mysql'")


def test_database_config_postgres_without_database_name_is_rejected():
    with pytest.raises(ImproperlyConfigured):
        database_config("postgres://u:p@h:5432", Path("/unused"))


def test_read_bool_accepts_common_words_and_rejects_others():
    assert [read_bool({"X": word}, "X", default=False) for word in ("1", "true", "Yes", "on")] == [True] * 4
    assert [read_bool({"X": word}, "X", default=True) for word in ("0", "false", "NO", "off")] == [False] * 4
    assert read_bool({}, "X", default=True) is True
    with pytest.raises(ImproperlyConfigured) as excinfo:
        read_bool({"DEBUG": "maybe"}, "DEBUG", default=False)
    assert "DEBUG='maybe'" in str(excinfo.value)


def test_read_int_and_read_list_parse_values():
    assert read_int({"N": "42"}, "N", default=1) == 42
    assert read_int({}, "N", default=7) == 7
    assert read_list({"HOSTS": " a.example , b.example,, "}, "HOSTS", default=[]) == [
        "a.example",
        "b.example",
    ]
    with pytest.raises(ImproperlyConfigured):
        read_int({"N": "ten"}, "N", default=1)


def test_secret_key_generated_once_and_persisted_in_debug(tmp_path):
    first = secret_key({}, debug=True, data_dir=tmp_path)
    second = secret_key({}, debug=True, data_dir=tmp_path)
    assert first == second
    assert len(first) >= 50
    assert (tmp_path / "secret_key").read_text() == first


def test_secret_key_required_without_debug(tmp_path):
    with pytest.raises(ImproperlyConfigured) as excinfo:
        secret_key({}, debug=False, data_dir=tmp_path)
    assert "SECRET_KEY is required when DEBUG=0" in str(excinfo.value)


def run_django(code: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with only `env` (plus PATH) configuring Django."""
    clean_env = {
        "PATH": os.environ.get("PATH", ""),
        "DJANGO_SETTINGS_MODULE": "thinkingbox_web.settings",
        "TB_DATA_DIR": str(tmp_path / "data"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_settings_debug_off_without_secret_key_fails_to_start(tmp_path):
    result = run_django(
        "import django; django.setup()", {"DEBUG": "0", "ALLOWED_HOSTS": "example.com"}, tmp_path
    )
    assert result.returncode != 0
    assert "SECRET_KEY is required when DEBUG=0" in result.stderr


def test_settings_read_database_url_and_hosts_from_env(tmp_path):
    code = (
        "from django.conf import settings as s; d = s.DATABASES['default'];"
        "print(d['ENGINE'], d['NAME'], d['HOST'], d['PORT'], s.DEBUG, ','.join(s.ALLOWED_HOSTS), s.LOG_LEVEL)"
    )
    env = {
        "DEBUG": "0",
        "SECRET_KEY": REAL_LOOKING_SECRET,
        "ALLOWED_HOSTS": "tb.example.com,api.example.com",
        "DATABASE_URL": "postgres://u:p@10.0.0.5:5433/tb",
        "LOG_LEVEL": "warning",
    }
    result = run_django(code, env, tmp_path)
    assert result.stderr == ""
    assert result.stdout.split() == [
        "django.db.backends.postgresql",
        "tb",
        "10.0.0.5",
        "5433",
        "False",
        "tb.example.com,api.example.com",
        "WARNING",
    ]


EMBEDDED_SEND = """
import django; django.setup()
from django.db import connection
from kombu.exceptions import EncodeError
from thinkingbox_web.celery import app
connection.ensure_connection()
print(connection.vendor)
app.send_task("core.record_heartbeat")
try:
    app.send_task("core.record_heartbeat", args=[object()])
except EncodeError:
    print("not JSON: refused")
"""


def test_embedded_defaults_keep_database_and_broker_in_the_data_folder(tmp_path):
    # No DATABASE_URL, no CELERY_BROKER_URL, started from some other folder: everything the process
    # writes (SQLite file, JSON messages, the broker's exchange tables) lands under TB_DATA_DIR.
    elsewhere = tmp_path / "started-here"
    elsewhere.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", EMBEDDED_SEND],
        cwd=elsewhere,
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(PROJECT_ROOT),
            "DJANGO_SETTINGS_MODULE": "thinkingbox_web.settings",
            "TB_DATA_DIR": str(tmp_path / "data"),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.stdout.splitlines() == ["sqlite", "not JSON: refused"], result.stderr
    data = tmp_path / "data"
    assert (data / "db.sqlite3").is_file() and (data / "secret_key").is_file()
    messages = [json.loads(path.read_text()) for path in (data / "broker" / "queue").iterdir()]
    assert [(m["content-type"], m["headers"]["task"]) for m in messages] == [
        ("application/json", "core.record_heartbeat")
    ]
    assert sorted(p.name for p in (data / "broker" / "control").iterdir()) == ["celery.exchange"]
    assert list(elsewhere.iterdir()) == []


def test_celery_accepts_only_json_messages():
    import pickle

    from kombu.exceptions import ContentDisallowed
    from kombu.serialization import loads, prepare_accept_content

    from thinkingbox_web.celery import app

    accept = prepare_accept_content(app.conf.accept_content)  # what a worker's consumer is given
    body = pickle.dumps({"task": "worker.run_attempt"})
    with pytest.raises(ContentDisallowed):
        loads(body, "application/x-python-serialize", "binary", accept=accept)
    assert loads(b"[7]", "application/json", "utf-8", accept=accept) == [7]


def test_check_deploy_is_clean_with_production_env(tmp_path):
    env = {
        "DEBUG": "0",
        "SECRET_KEY": REAL_LOOKING_SECRET,
        "ALLOWED_HOSTS": "example.com",
        "DATABASE_URL": "postgres://u:p@127.0.0.1:5432/db",
    }
    code = "import sys; from django.core.management import execute_from_command_line as m; m(sys.argv)"
    result = subprocess.run(
        [sys.executable, "-c", code, "check", "--deploy", "--fail-level", "WARNING"],
        cwd=PROJECT_ROOT,
        env={
            "PATH": os.environ.get("PATH", ""),
            "DJANGO_SETTINGS_MODULE": "thinkingbox_web.settings",
            "TB_DATA_DIR": str(tmp_path / "data"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "System check identified no issues (1 silenced)."


DEMO_PAGES = """
import django; django.setup()
from django.conf import settings
from django.test import Client
client = Client(raise_request_exception=False, HTTP_HOST="127.0.0.1")
missing = client.get("/no-such-page/")
print(settings.DEBUG, settings.SECURE_SSL_REDIRECT, missing.status_code, b"URLconf" in missing.content)
print(client.get("/accounts/login/").status_code)
static = client.get("/static/favicon.svg")
print(static.status_code, b"".join(static.streaming_content)[:4])
plotly = client.get("/static/vendor/plotly/plotly-cartesian-4.1.1.min.js", HTTP_ACCEPT_ENCODING="gzip")
print(plotly.status_code, plotly["Content-Encoding"], plotly["Cache-Control"])
"""


def test_demo_serves_with_debug_off_and_static_files_through_whitenoise(tmp_path):
    result = run_django(DEMO_PAGES, {"TB_DEMO": "1"}, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:4] == [
        "False False 404 False",
        "200",
        "200 b'<svg'",
        "200 gzip max-age=31536000, public, immutable",
    ]


def test_demo_asked_for_debug_keeps_the_debug_pages(tmp_path):
    result = run_django(DEMO_PAGES, {"TB_DEMO": "1", "DEBUG": "1"}, tmp_path)

    assert result.stdout.split("\n")[0] == "True False 404 True"


def test_run_py_demo_turns_debug_off_unless_asked(monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("tb_run_script_demo", PROJECT_ROOT / "run.py")
    run_script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, run_script)
    spec.loader.exec_module(run_script)
    seen = []
    monkeypatch.setattr(run_script, "check_call", lambda command, **kwargs: None)
    monkeypatch.setattr(
        run_script.subprocess,
        "run",
        lambda command, **kwargs: (
            seen.append((command[2:], os.environ["TB_DEMO"], os.environ["DEBUG"]))
            or subprocess.CompletedProcess(command, 0)
        ),
    )
    monkeypatch.setenv("DEBUG", "1")
    monkeypatch.setenv("TB_DEMO", "0")  # restored afterwards: command_demo sets both

    run_script.command_demo("python", ["--no-serve"])
    run_script.command_demo("python", ["--debug", "--no-serve"])

    assert seen == [(["demo", "--no-serve"], "1", "0"), (["demo", "--no-serve"], "1", "1")]
