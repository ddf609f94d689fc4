"""One attempt as a reviewer opens it, and what a review reads of it: its rubric answers, its campaign.

The caller checks who may see the attempt (its access helpers filter the querysets returned here);
this module knows the attempt's columns and the stored result's rubric answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Exists, OuterRef, QuerySet

from apps.attempts.models import Attempt
from apps.attempts.selectors.results import StoredResultError
from tb_engine import result_format as read
from tb_engine.result_format import ResultFormatError
from tb_engine.results import READABLE_FORMATS, UNVERSIONED_FORMAT, RubricResult


def attempts_for_review() -> QuerySet[Attempt]:
    """Attempts with the campaign's team and the task: what a review change needs (for an access helper)."""
    return Attempt.objects.select_related("campaign__team", "task")


def attempts_for_panel() -> QuerySet[Attempt]:
    """As ``attempts_for_review``, without the result JSON (the panel reads only what the selectors give it)."""
    return attempts_for_review().defer("result")


def attempt_for_review_api(*, pk: int, campaigns: QuerySet) -> Attempt | None:
    """Attempt ``pk`` if it belongs to one of ``campaigns`` (a Campaign queryset), with only the columns a
    review response needs; else None (one query)."""
    return (
        attempts_for_review()
        .filter(pk=pk, campaign__in=campaigns.values("pk"))
        .only("id", "campaign_id", "task_id", "campaign__team_id", "campaign__team__name", "task__task_id")
        .first()
    )


def attempt_in_campaigns(*, attempt_id: OuterRef, campaign_ids: Sequence[int]) -> Exists:
    """An expression: whether the attempt ``attempt_id`` points at (in an outer query) belongs to these campaigns."""
    return Exists(Attempt.objects.filter(pk=attempt_id, campaign_id__in=list(campaign_ids)))


def stored_rubrics(*, attempt_id: int) -> list[RubricResult]:
    """The attempt's rubric answers, typed, reading only that part of its stored result (one query).

    A page asks for them on every drilldown, so the database extracts them rather than the whole
    result (transcripts included) being loaded and read. The result's format version is checked as
    ``AttemptResult.from_dict`` checks it: an unknown one is refused, never mis-read. An attempt
    without a result, or a result without rubric answers, has none.
    """
    found = (
        Attempt.objects.filter(pk=attempt_id).values_list("result__format_version", "result__rubrics").first()
    )
    if found is None:
        return []
    version, rubrics = found
    version = UNVERSIONED_FORMAT if version is None else version
    try:
        if version not in READABLE_FORMATS:
            readable = ", ".join(str(v) for v in READABLE_FORMATS)
            raise ResultFormatError(
                f"is {version}, a format this engine does not read (it reads version {readable})",
                path="format_version",
            )
        return read.nested_list({"rubrics": rubrics or []}, "rubrics", RubricResult.from_dict)
    except ResultFormatError as error:
        raise StoredResultError(error.of_version(version), attempt_id=attempt_id) from error
