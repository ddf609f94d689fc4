"""Reads worth a name for suites: what workers need to rebuild engine specs from stored rows."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from apps.core.access import teams_for
from apps.suites.models import Domain, Suite, Task


def suites_visible_to(user) -> QuerySet[Suite]:
    """Suites the user may see: shared ones (no team) and their teams' own (admins: all)."""
    return Suite.objects.filter(Q(team__isnull=True) | Q(team__in=teams_for(user)))


def tasks_visible_to(user) -> QuerySet[Task]:
    """Tasks of the suites the user may see."""
    return Task.objects.filter(Q(suite__team__isnull=True) | Q(suite__team__in=teams_for(user)))


def task_spec_data(*, task_pk: int) -> dict:
    """The stored engine spec of a task (tb_engine.spec_json.task_to_dict), without loading the row."""
    return Task.objects.values_list("spec", flat=True).get(pk=task_pk)


def builtin_suite_sources() -> list[tuple[str, str]]:
    """(built-in engine suite, content hash) of every stored suite made of built-in domains, sorted.

    A stored suite assembled from built-in domains (e.g. the throughput benchmark's) names the
    engine suite its domains come from in ``Domain.spec["builtin_suite"]``.
    """
    rows = Domain.objects.filter(suite__source=Suite.Source.BUILTIN).values_list(
        "suite__name", "suite__content_hash", "spec"
    )
    return sorted(
        {((spec or {}).get("builtin_suite", name), content_hash) for name, content_hash, spec in rows}
    )
