"""A worker's memory budget: past it, attempts go back to the queue unclaimed."""

from __future__ import annotations

import os

import pytest
from celery.exceptions import Retry

from apps.worker import attempts, tasks
from apps.worker.memory import MemoryBudget, process_tree, tree_pss_mb


class Readings:
    def __init__(self, *values: float) -> None:
        self.values = list(values)
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return self.values.pop(0)


def test_budget_is_over_only_past_its_limit_and_measures_at_most_every_interval():
    readings = Readings(900.0, 1200.0)
    budget = MemoryBudget(1000, every_s=3600.0, measure=readings)

    assert [budget.over(), budget.over()] == [False, False]
    assert readings.calls == 1

    budget.every_s = 0.0
    assert budget.over() is True
    assert budget.used_mb == 1200.0


def test_no_budget_never_measures():
    readings = Readings()
    assert MemoryBudget(0, measure=readings).over() is False
    assert readings.calls == 0


def test_tree_pss_counts_this_process():
    assert process_tree(os.getpid())[0] == os.getpid()
    assert tree_pss_mb() > 10.0


@pytest.mark.django_db
def test_an_attempt_over_the_budget_is_sent_back_unclaimed(monkeypatch, settings):
    settings.WORKER_MEMORY_MB = 1
    settings.WORKER_MEMORY_RETRY_SECONDS = 7
    claimed = []
    monkeypatch.setattr(attempts, "attempt_execute", lambda *, attempt_id: claimed.append(attempt_id))
    retried = []

    def retry(*, countdown):
        retried.append(countdown)
        return Retry("over budget")

    monkeypatch.setattr(tasks.run_attempt, "retry", retry)

    with pytest.raises(Retry):
        tasks.run_attempt.run(7)
    assert (claimed, retried) == ([], [7])

    settings.WORKER_MEMORY_MB = 0
    tasks.run_attempt.run(8)
    assert claimed == [8]
