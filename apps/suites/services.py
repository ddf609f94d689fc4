"""Writes for suites: loading engine suites into the database."""

from __future__ import annotations

from django.db import transaction

from apps.core.text import without_nul
from apps.suites.models import Domain, Suite, Task
from tb_engine.loader import load_builtin_suite
from tb_engine.spec import SuiteSpec
from tb_engine.spec_json import domain_to_dict, task_to_dict
from tb_engine.validation import validate_suite


@transaction.atomic
def suite_store(
    *, spec: SuiteSpec, source: str = Suite.Source.BUILTIN, validations: dict | None = None, team=None
) -> Suite:
    """Create or update a suite from an engine SuiteSpec, in one transaction.

    Side effects: upserts Suite, Domain and Task rows; tasks no longer in the spec are kept (old
    attempts point at them) but untouched. ``validations`` maps task id -> (status, detail).
    """
    validations = validations or {}
    suite, _ = Suite.objects.update_or_create(
        name=without_nul(spec.name),
        defaults={
            "title": without_nul(spec.description.split("\n")[0][:200] if spec.description else spec.name),
            "version": spec.version,
            "description": without_nul(spec.description),
            "source": source,
            "content_hash": spec.content_hash(),
            "evaluation_only": spec.evaluation_only,
            "team": team,
        },
    )
    domains = {}
    for name, domain_spec in spec.domains.items():
        domains[name], _ = Domain.objects.update_or_create(
            suite=suite,
            name=without_nul(name),
            defaults=without_nul(
                {
                    "title": domain_spec.title,
                    "policy": domain_spec.policy,
                    "backend": domain_spec.backend,
                    "spec": domain_to_dict(domain_spec),
                }
            ),
        )
    existing = {t.task_id: t for t in Task.objects.filter(suite=suite)}
    to_create, to_update = [], []
    for task_id, task_spec in spec.tasks.items():
        status, detail = validations.get(task_id, (Task.Validation.UNKNOWN, ""))
        fields = {
            "domain": domains[task_spec.domain],
            "title": without_nul(task_spec.title or task_id),
            "tags": without_nul(list(task_spec.tags)),
            "content_hash": task_spec.content_hash(),
            "spec": without_nul(task_to_dict(task_spec)),
            "validation": status,
            "validation_detail": without_nul(detail),
        }
        row = existing.get(task_id)
        if row is None:
            to_create.append(Task(suite=suite, task_id=without_nul(task_id), **fields))
        else:
            for key, value in fields.items():
                setattr(row, key, value)
            to_update.append(row)
    Task.objects.bulk_create(to_create, batch_size=500)
    if to_update:
        Task.objects.bulk_update(to_update, list(fields), batch_size=500)
    return suite


def suite_load_builtin(*, name: str = "starter", validate: bool = True) -> Suite:
    """Load a built-in engine suite (validating each task) into the database."""
    spec = load_builtin_suite(name)
    validations = {}
    if validate:
        for report in validate_suite(spec):
            validations[report.task_id] = (report.status, "\n".join(report.problems))
    return suite_store(spec=spec, validations=validations)


def task_validation_set(*, task: Task, status: str, detail: str = "") -> Task:
    """Record the outcome of validating ``task`` on the row campaigns select by (``Task.validation``).

    Side effects: the task's validation and detail. An ``unknown`` outcome (infrastructure error)
    leaves an earlier verdict alone: it says nothing about the task.
    """
    if status == Task.Validation.UNKNOWN and task.validation != Task.Validation.UNKNOWN:
        return task
    Task.objects.filter(pk=task.pk).update(validation=status, validation_detail=detail[:10_000])
    task.validation, task.validation_detail = status, detail[:10_000]
    return task
