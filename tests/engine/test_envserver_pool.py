"""Pool files and the command-line entry point of the environment server."""

from __future__ import annotations

import json

import pytest

from tb_engine.envserver.__main__ import build_environment, main, parser
from tb_engine.envserver.episodes import EvaluationOnlyError
from tb_engine.envserver.pool import POOL_FORMAT, PoolFileError, read_pool


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


def test_build_environment_serves_only_the_pool(tmp_path):
    env = build_environment(parser().parse_args(["--pool", str(_pool(tmp_path))]))
    assert env.pool == ["retail/ticket_hold_carrier_exception", "travel/downgrade_suite_pending_manager"]


def test_build_environment_refuses_evaluation_only_pool_unless_overridden(tmp_path):
    path = _pool(tmp_path, suite={"name": "starter", "version": "1.0", "evaluation_only": True})
    with pytest.raises(EvaluationOnlyError) as refused:
        build_environment(parser().parse_args(["--pool", str(path)]))
    assert str(refused.value) == (
        f"{path}: suite starter is evaluation-only (its licence forbids training on it); pass --allow-evaluation-only to override"
    )
    env = build_environment(parser().parse_args(["--pool", str(path), "--allow-evaluation-only"]))
    assert len(env.pool) == 2


def test_main_exits_2_with_message_for_a_missing_pool(tmp_path, capsys):
    code = main(["--pool", str(tmp_path / "absent.json")])
    assert code == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'absent.json'}: cannot read:")
