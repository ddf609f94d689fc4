"""The training environment without HTTP: episode memory, expiry bookkeeping, the episode cap."""

from __future__ import annotations

import pytest

from tb_engine.loader import load_builtin_suite
from tb_engine.training import EnvError, Environment

SUITE = load_builtin_suite()
TASK = "retail/ticket_hold_carrier_exception"


def test_environment_finished_episodes_stay_queryable_until_memory_is_full(monkeypatch):
    monkeypatch.setattr("tb_engine.training.environment.FINISHED_MEMORY", 2)
    env = Environment(SUITE)
    ids = []
    for _ in range(3):
        started = env.reset(task_id=TASK)
        env.step(started["episode_id"], {"text": "Nothing to do.", "done": True})
        ids.append(started["episode_id"])
    with pytest.raises(EnvError) as forgotten:
        env.state(ids[0])
    kept = [(env.state(episode_id)["done"], env.state(episode_id)["reward"]) for episode_id in ids[1:]]
    health = env.health()
    env.close()
    assert forgotten.value.status == 410
    assert kept == [(True, 0.0), (True, 0.0)]
    assert (health["episodes"], health["finished"]) == (0, 2)


def test_environment_refuses_new_episodes_past_max_episodes_until_one_finishes():
    env = Environment(SUITE, max_episodes=2)
    first, _ = env.reset(task_id=TASK), env.reset(task_id=TASK)
    with pytest.raises(EnvError) as full:
        env.reset(task_id=TASK)
    env.step(first["episode_id"], {"text": "Nothing to do.", "done": True})
    third = env.reset(task_id=TASK)
    env.close()
    assert (full.value.status, full.value.message) == (
        503,
        "too many open episodes (2); finish or abandon some first",
    )
    assert third["task_id"] == TASK
