"""Training pool files: reading them, and every problem naming the file and the field."""

from __future__ import annotations

import json

import pytest

from tb_engine.training.pool import POOL_FORMAT, PoolFileError, read_pool


def _pool(tmp_path, **overrides):
    data = {
        "format": POOL_FORMAT,
        "suite": {"name": "starter", "version": "1.0", "evaluation_only": False},
        "tasks": [
            {"task_id": "retail/ticket_hold_carrier_exception"},
            {"task_id": "travel/downgrade_suite_pending_manager"},
        ],
        **overrides,
    }
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(data))
    return path


def test_read_pool_returns_task_ids(tmp_path):
    pool = read_pool(_pool(tmp_path))
    assert pool.task_ids == ("retail/ticket_hold_carrier_exception", "travel/downgrade_suite_pending_manager")
    assert (pool.suite, pool.evaluation_only) == ("starter", False)


def test_read_pool_errors_name_file_and_field(tmp_path):
    path = _pool(tmp_path, tasks=[{"task": "x"}])
    with pytest.raises(PoolFileError) as caught:
        read_pool(path)
    assert str(caught.value) == f"{path}: tasks[0].task_id: missing"
    bad = _pool(tmp_path, format="other")
    with pytest.raises(PoolFileError) as wrong_format:
        read_pool(bad)
    assert str(wrong_format.value) == f"{bad}: format: expected {POOL_FORMAT!r}, got 'other'"
