"""Read configuration from environment variables with clear errors.

Plain functions over a mapping (normally os.environ) so tests can call them with any environment.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from dj_database_url import DBConfig

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}
SQLITE_FILE_NAME = "db.sqlite3"
SECRET_KEY_FILE_NAME = "secret_key"


def read_bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    """Return the boolean value of environment variable `name` (1/0, true/false, yes/no, on/off)."""
    raw = environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(
        f"environment variable {name}={raw!r}: expected one of 1/0, true/false, yes/no, on/off"
    )


def read_int(environ: Mapping[str, str], name: str, default: int) -> int:
    """Return the integer value of environment variable `name`."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"environment variable {name}={raw!r}: expected an integer") from None


def read_list(environ: Mapping[str, str], name: str, default: list[str]) -> list[str]:
    """Return the comma-separated values of environment variable `name`, blanks dropped."""
    raw = environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_config(url: str | None, data_dir: Path, *, conn_max_age: int = 60) -> DBConfig:
    """Return a Django DATABASES['default'] dict for DATABASE_URL, or the embedded SQLite file."""
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(data_dir / SQLITE_FILE_NAME),
            # SQLite is single-writer. The web process and a worker share the file, so: wait for
            # the lock instead of failing, take it at BEGIN (no deadlocking lock upgrades), and
            # use WAL so readers never block the writer.
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    scheme = url.split(":", 1)[0].lower()
    if scheme not in {"postgres", "postgresql", "pgsql", "sqlite"}:
        raise ImproperlyConfigured(
            f"environment variable DATABASE_URL: unsupported scheme {scheme!r} (use postgres://... or sqlite:///...)"
        )
    # Persistent connections: Celery's Django fixup closes a connection after every task when
    # CONN_MAX_AGE is 0, and a new PostgreSQL connection per attempt cost half a worker's time.
    config = dj_database_url.parse(url, conn_max_age=conn_max_age, conn_health_checks=True)
    if config["ENGINE"] == "django.db.backends.postgresql" and not config.get("NAME"):
        raise ImproperlyConfigured("environment variable DATABASE_URL: the PostgreSQL URL names no database")
    return config


def secret_key(environ: Mapping[str, str], *, debug: bool, data_dir: Path) -> str:
    """Return SECRET_KEY from the environment; in DEBUG mode generate and persist one under data_dir."""
    configured = environ.get("SECRET_KEY", "").strip()
    if configured:
        return configured
    if not debug:
        raise ImproperlyConfigured(
            "environment variable SECRET_KEY is required when DEBUG=0 (use 50+ random characters)"
        )
    key_file = data_dir / SECRET_KEY_FILE_NAME
    if key_file.exists():
        return key_file.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    # Write then rename so two processes starting at once never read a half-written key.
    tmp_file = key_file.with_suffix(f".{os.getpid()}.tmp")
    tmp_file.write_text(key)
    tmp_file.chmod(0o600)
    os.replace(tmp_file, key_file)
    return key_file.read_text().strip()


def filesystem_broker_options(data_dir: Path) -> dict:
    """Return kombu filesystem-transport options with all its folders under data_dir/broker (created)."""
    queue_dir = data_dir / "broker" / "queue"
    processed_dir = data_dir / "broker" / "processed"
    # Exchange-to-queue tables; kombu's default is ./control, i.e. wherever the process started.
    control_dir = data_dir / "broker" / "control"
    # Files that are not whole messages are moved here (thinkingbox_web.filesystem_broker).
    rejected_dir = data_dir / "broker" / "rejected"
    for folder in (queue_dir, processed_dir, control_dir, rejected_dir):
        folder.mkdir(parents=True, exist_ok=True)
    # Producer and consumer share one folder: the web process writes messages, the worker reads them.
    return {
        "data_folder_in": str(queue_dir),
        "data_folder_out": str(queue_dir),
        "processed_folder": str(processed_dir),
        "control_folder": str(control_dir),
        "rejected_folder": str(rejected_dir),
        "store_processed": False,
        # The filesystem transport delivers one message per poll: poll often or attempts crawl.
        "polling_interval": 0.02,
    }
