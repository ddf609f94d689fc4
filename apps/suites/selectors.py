"""Reads worth a name for suites: what workers need to rebuild engine specs from stored rows."""

from __future__ import annotations

from apps.suites.models import Domain, Suite, Task


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
