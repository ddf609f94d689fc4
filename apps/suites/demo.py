"""Demo step: load and validate the built-in five-domain suite."""

from __future__ import annotations

from apps.core.demo import DemoContext, demo_step
from apps.suites.services import suite_load_builtin


@demo_step(order=20, name="load the built-in five-domain suite")
def load_suite(context: DemoContext) -> None:
    suite = suite_load_builtin(name="starter", validate=True)
    counts: dict[str, int] = {}
    for status in suite.tasks.values_list("validation", flat=True):
        counts[status] = counts.get(status, 0) + 1
    context.shared["suite"] = suite
    context.notes.append(
        f"Suite: {suite.name} v{suite.version}, {suite.tasks.count()} tasks in {suite.domains.count()} domains "
        f"({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))})"
    )
