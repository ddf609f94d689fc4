"""What the attempt record says against a task: passes without a tool call, verdicts a server disputes.

Read by triage's suspect-task queue and task-health page. The ThinkingBox evidence sits inside the
stored result (``extra.thinkingbox``: a ``disagree`` flag at its top or in a server's effects), so
the JSON lookups that find it are here, beside the table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, Min

from apps.attempts.models import Attempt


@dataclass(frozen=True)
class IdlePasses:
    task_id: int  # the task's primary key
    count: int  # attempts that passed without a tool call
    example: int  # the first such attempt's id


def idle_passes(*, campaign_ids: Sequence[int]) -> list[IdlePasses]:
    """Per task, the campaigns' attempts that passed without a single tool call (one query)."""
    rows = (
        Attempt.objects.filter(
            campaign__in=list(campaign_ids),
            status=Attempt.Status.DONE,
            verdict=Attempt.Verdict.PASS,
            tool_calls=0,
        )
        .order_by()
        .values("task_id")
        .annotate(n=Count("id"), example=Min("id"))
    )
    return [IdlePasses(task_id=row["task_id"], count=row["n"], example=row["example"]) for row in rows]


def disputed_attempts(*, campaign_ids: Sequence[int]) -> dict[int, list[int]]:
    """Task pk -> ids (ascending) of the campaigns' done attempts whose ThinkingBox server disputes our verdict."""
    attempts = Attempt.objects.filter(campaign__in=list(campaign_ids), status=Attempt.Status.DONE)
    found: dict[int, list[int]] = defaultdict(list)
    if connection.vendor == "postgresql":
        # The flag at the top of the evidence or inside any server's effects, found by the server.
        flagged = attempts.extra(where=["result @? '$.extra.thinkingbox.** ? (@.disagree == true)'"])
        for task_id, pk in flagged.order_by("pk").values_list("task_id", "pk"):
            found[task_id].append(pk)
    else:
        for task_id, pk, evidence in attempts.order_by("pk").values_list(
            "task_id", "pk", "result__extra__thinkingbox"
        ):
            if _disagrees(evidence):
                found[task_id].append(pk)
    return found


def _disagrees(value: Any) -> bool:
    if isinstance(value, dict):
        return value.get("disagree") is True or any(_disagrees(v) for v in value.values())
    if isinstance(value, list):
        return any(_disagrees(v) for v in value)
    return False


def verdict_disagreements(*, campaign_ids: Sequence[int], limit: int = 50) -> list[Attempt]:
    """The campaigns' attempts whose ThinkingBox evidence flags a disagreement at its top, newest first,
    with their task and campaign (no result JSON loaded)."""
    return list(
        Attempt.objects.filter(campaign_id__in=list(campaign_ids), result__extra__thinkingbox__disagree=True)
        .select_related("task", "campaign")
        .only("id", "index", "verdict", "task__task_id", "campaign__name", "finished_at")
        .order_by("-finished_at", "-pk")[:limit]
    )
