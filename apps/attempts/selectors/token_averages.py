"""What a finished attempt of a suite uses on average: the basis of a launch's cost estimate."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Avg, Count

from apps.attempts.models import Attempt


@dataclass(frozen=True)
class TokenAverages:
    """Mean tokens per done attempt over ``sample`` attempts (the means are None when sample is 0)."""

    sample: int
    input_tokens: float | None
    cached_input_tokens: float | None
    output_tokens: float | None
    reasoning_tokens: float | None


def done_attempt_token_averages(*, suite_id: int, agent_id: int | None = None) -> TokenAverages:
    """Mean tokens of the suite's done attempts, of one agent's campaigns or (None) of every agent's (one query)."""
    done = Attempt.objects.filter(campaign__suite_id=suite_id, status=Attempt.Status.DONE)
    if agent_id is not None:
        done = done.filter(campaign__agent_id=agent_id)
    row = done.aggregate(
        sample=Count("id"),
        input_tokens=Avg("input_tokens"),
        cached_input_tokens=Avg("cached_input_tokens"),
        output_tokens=Avg("output_tokens"),
        reasoning_tokens=Avg("reasoning_tokens"),
    )
    return TokenAverages(**row)
