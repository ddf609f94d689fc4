"""Training pool files (JSON written by ``manage.py select_training_pool``): read and check them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POOL_FORMAT = "thinkingbox-training-pool/1"


class PoolFileError(ValueError):
    """A pool file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class PoolFile:
    path: str
    suite: str
    evaluation_only: bool
    task_ids: tuple[str, ...]
    data: dict[str, Any]


def read_pool(path: str | Path) -> PoolFile:
    """Parse a pool file; every problem names the file and the field."""
    where = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise PoolFileError(f"{where}: cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise PoolFileError(f"{where}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PoolFileError(f"{where}: expected a JSON object")
    if data.get("format") != POOL_FORMAT:
        raise PoolFileError(f"{where}: format: expected {POOL_FORMAT!r}, got {data.get('format')!r}")
    suite = data.get("suite")
    if not isinstance(suite, dict) or not isinstance(suite.get("name"), str):
        raise PoolFileError(f"{where}: suite.name: missing")
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        raise PoolFileError(f"{where}: tasks: expected a list")
    task_ids = []
    for index, entry in enumerate(tasks):
        if not isinstance(entry, dict) or not isinstance(entry.get("task_id"), str):
            raise PoolFileError(f"{where}: tasks[{index}].task_id: missing")
        task_ids.append(entry["task_id"])
    return PoolFile(where, suite["name"], bool(suite.get("evaluation_only", False)), tuple(task_ids), data)
