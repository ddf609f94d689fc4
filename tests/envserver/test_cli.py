"""The environment server's command line: the pool restricts the tasks, evaluation-only suites are refused."""

from __future__ import annotations

import json

import pytest

from tb_engine.training.environment import EvaluationOnlyError
from tb_engine.training.pool import POOL_FORMAT
from tb_envserver.__main__ import build_environment, main, parser


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
