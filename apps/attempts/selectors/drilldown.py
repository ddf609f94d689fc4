"""The attempt drilldown's reads: the attempt with what its page shows beside it, its neighbours,
and the stored result for the raw download. The drilldown's attempt is read visible-only (the
viewer's teams, core.access); for the others visibility is the caller's (core.access filters them)."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.attempts.models import Attempt
from apps.core.access import team_condition_sql
from apps.core.joined_rows import JoinedRows

# The attempt with its campaign's agent, its task's domain and its process-risk row joined (the page
# names all three and marks the findings: selectors.process_risk.process_findings_of). The task's and
# domain's specs and the domain's policy are left out: the page shows names, ids and the validation,
# and a domain's spec holds its tables and every tool schema (tens of KB on an imported suite).
# Written as SQL built once per process (apps.core.joined_rows): compiling the ORM query (six
# tables, deferred columns, the team subquery) was a quarter of a warm drilldown's Python.
_DRILLDOWN_READ = JoinedRows(
    Attempt,
    ("campaign", "campaign__agent", "task", "task__domain", "process_risk"),
    defer={"task": ("spec", "validation_detail"), "task__domain": ("spec", "policy")},
)


def visible_drilldown_attempt(*, user, pk: int) -> Attempt | None:
    """The attempt `pk` with what its page shows beside it, if its campaign's team is one of the
    user's (core.access.teams_for, as get_visible_or_404 filters); None otherwise."""
    campaign = _DRILLDOWN_READ.alias("campaign")
    conditions, params = ['"b"."id" = %s'], [int(pk)]
    team_condition = team_condition_sql(user, f'"{campaign}"."team_id"')
    if team_condition is not None:
        conditions.append(team_condition[0])
        params += team_condition[1]
    found = _DRILLDOWN_READ.fetch(" AND ".join(conditions), params)
    return found[0] if found else None


def raw_result_attempts() -> QuerySet[Attempt]:
    """Attempts with only what the raw-result download needs: the id, the campaign and the stored result."""
    return Attempt.objects.only("id", "campaign_id", "result")


def attempt_neighbours(*, attempt: Attempt) -> tuple[int | None, int | None]:
    """Ids of the previous and next attempt (by index) of the same campaign and task (one query)."""
    siblings = list(
        Attempt.objects.filter(campaign_id=attempt.campaign_id, task_id=attempt.task_id)
        .order_by("index")
        .values_list("id", "index")
    )
    before = [pk for pk, index in siblings if index < attempt.index]
    after = [pk for pk, index in siblings if index > attempt.index]
    return (before[-1] if before else None, after[0] if after else None)
