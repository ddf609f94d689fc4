"""python manage.py validate_suite --suite NAME: validate every task of any stored suite, imported ones included.

Golden replay on the task's real backend (twice, for determinism) and a do-nothing run; prints each
flagged task with its problems, then the summary line 'N tasks: V valid, I invalid, D
non-discriminating' last; the results are stored as task health. Exits 1 when a task is invalid or
when no task could be validated (every one an infrastructure error, an empty suite, or ThinkingBox
servers installed without their seed data, which the summary line names and which leaves every task
as it was). A name that is not stored but is a built-in suite is loaded first.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.suites.models import Suite
from apps.suites.services import suite_load_builtin
from apps.triage.validation import suite_validate
from tb_engine.loader import SpecError


class Command(BaseCommand):
    help = "Validate every task of a suite (built-in or imported) on its own backend; results stored as task health."

    def add_arguments(self, parser):
        parser.add_argument("--suite", default="starter")

    def handle(self, *args, **options):
        name = options["suite"]
        suite = Suite.objects.filter(name=name).first()
        if suite is None:
            try:
                suite = suite_load_builtin(name=name, validate=False)
            except (SpecError, KeyError, FileNotFoundError, ValueError) as exc:
                raise CommandError(f"unknown suite {name!r}: import or load it first ({exc})") from None
        lines: list[str] = []
        run = suite_validate(suite=suite, progress=lines.append)
        # The findings first, the summary line last: it is what a terminal or a CI log shows at the end.
        for line in lines:
            if not line.endswith(": valid") or line.startswith("  "):
                self.stdout.write(line)
        self.stdout.write(_summary(run))
        if _validated(run) == 0:
            raise CommandError(f"no task of suite {suite.name!r} could be validated")
        if run.counts.get("invalid"):
            raise CommandError("the suite has invalid tasks")


def _validated(run) -> int:
    """Tasks the run could classify (an infrastructure error leaves a task unknown)."""
    return sum(run.counts.get(status, 0) for status in ("valid", "invalid", "non_discriminating"))


def _summary(run) -> str:
    if run.error:
        return f"{run.total} tasks: none validated: {run.error}"
    counts = run.counts
    summary = (
        f"{run.total} tasks: {counts.get('valid', 0)} valid, {counts.get('invalid', 0)} invalid, "
        f"{counts.get('non_discriminating', 0)} non-discriminating"
    )
    if counts.get("unknown"):
        summary += f", {counts['unknown']} not validated (infrastructure error)"
    if run.disagreements:
        summary += f"; {run.disagreements} run(s) where our verdict and the server's hash differ"
    return summary
