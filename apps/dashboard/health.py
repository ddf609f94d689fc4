"""The triage health toggle shared by every metric page, its exports and the API.

Tasks a triager flagged (grader bug, task ambiguous) stay in the figures unless the viewer asks
for ``?healthy=exclude``; either way the page says how many such tasks there are, so a figure is
never silently computed on a different task set than the reader assumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apps.campaigns.models import Campaign

EXCLUDE = "exclude"


@dataclass(frozen=True)
class HealthScope:
    unhealthy: frozenset[int]
    excluding: bool

    @property
    def exclude(self) -> frozenset[int]:
        """Task pks to leave out of the figures (empty unless the toggle is on)."""
        return self.unhealthy if self.excluding else frozenset()

    def context(self) -> dict:
        """Template variables of the toggle and its banner (dashboard/_health.html)."""
        return {
            "healthy": EXCLUDE if self.excluding else "",
            "unhealthy_count": len(self.unhealthy),
            "excluded_count": len(self.exclude),
        }


def health_scope(query: Mapping[str, str], campaigns: list[Campaign]) -> HealthScope:
    """The scope a request asks for: open health issues among the campaigns' tasks, excluded or not (one query)."""
    # Imported here: triage builds on the dashboard, not the other way round.
    from apps.triage.selectors import unhealthy_task_pks

    return HealthScope(
        unhealthy=unhealthy_task_pks(campaigns=campaigns), excluding=query.get("healthy") == EXCLUDE
    )
