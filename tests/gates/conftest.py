"""Gate fixtures: finished campaigns with per-task counts set directly (exact figures)."""

from __future__ import annotations

import pytest

from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import _fresh_cache, summaries_campaign  # noqa: F401 (fixtures)


@pytest.fixture
def finished_campaign(summaries_campaign, starter_suite):
    """finished_campaign([c per task], name=..., n=4): a done campaign over the first len(c) starter tasks."""

    def make(passes: list[int], *, name: str, n: int = 4):
        task_ids = list(
            starter_suite.tasks.order_by("task_id").values_list("task_id", flat=True)[: len(passes)]
        )
        campaign = summaries_campaign(dict(zip(task_ids, [(n, c) for c in passes])), name=name, n=n)
        campaign.status = "done"
        campaign.save(update_fields=["status"])
        return campaign

    return make


BASELINE = [4, 0, 2, 3, 4, 1, 4, 4, 2, 3, 4, 0, 3, 4, 2, 4, 1, 4, 3, 4]  # 20 tasks, N = 4


@pytest.fixture
def baseline(finished_campaign):
    return finished_campaign(BASELINE, name="Production")


@pytest.fixture
def small_drop(finished_campaign):
    """One pass fewer on two tasks: -2.5 pp pass@1, below its noise floor (about 4.7 pp)."""
    passes = list(BASELINE)
    for index in (0, 4):
        passes[index] -= 1
    return finished_campaign(passes, name="Candidate, small drop")


@pytest.fixture
def large_drop(finished_campaign):
    """One pass fewer on the 18 tasks that have one: -22.5 pp pass@1, far above its noise floor."""
    passes = [c - 1 if c > 0 else c for c in BASELINE]
    return finished_campaign(passes, name="Candidate, large drop")
