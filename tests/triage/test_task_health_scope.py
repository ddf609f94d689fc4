"""The task-health scope every metric request reads: flagged tasks leave the figures only on request."""

from __future__ import annotations

import pytest

from apps.triage.selectors import task_health_scope
from tests.triage.conftest import T1

pytestmark = pytest.mark.django_db


def test_scope_excludes_only_when_asked(flagged):
    a, b = flagged
    t1 = a.tasks.get(task_id=T1).pk

    assert task_health_scope({}, [a, b]).exclude == frozenset()
    assert task_health_scope({"healthy": "exclude"}, [a, b]).exclude == frozenset({t1})
    assert task_health_scope({"healthy": "exclude"}, [a, b]).context() == {
        "healthy": "exclude",
        "unhealthy_count": 1,
        "excluded_count": 1,
    }


def test_scope_counts_flagged_tasks_of_the_given_campaigns_only(flagged, attempts_campaign):
    other = attempts_campaign([(T1, 0, "pass", [], False)], name="Gamma")
    a, b = flagged

    assert task_health_scope({}, [a, b]).context() == {
        "healthy": "",
        "unhealthy_count": 1,
        "excluded_count": 0,
    }
    # Gamma runs the flagged task too: a health issue belongs to the task, not to one campaign.
    assert task_health_scope({"healthy": "exclude"}, [other]).exclude == frozenset(
        {a.tasks.get(task_id=T1).pk}
    )
    assert task_health_scope({"healthy": "yes"}, [a]).exclude == frozenset()
