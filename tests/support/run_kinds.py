"""The six run kinds of the verdict-agreement checks, on any task and backend.

golden, do-nothing, skip-last-write, changed-argument, duplicate-create, unstable-text-edit
(tb_engine.agents.harness_checks). Each run keeps our state verdict beside the server's hash
verdict, so a test or benchmark can count the disagreements per domain and kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from tb_engine.agents.harness_checks import RUN_KINDS
from tb_engine.attempt_setup import AttemptSetup
from tb_engine.spec import DomainSpec, TaskSpec


@dataclass(frozen=True)
class KindOutcome:
    domain: str
    task_id: str
    kind: str
    applicable: bool
    note: str = ""
    status: str = ""
    verdict: str | None = None
    our_pass: bool | None = None
    hash_pass: bool | None = None
    declarations_verified: bool | None = None
    error: str = ""

    @property
    def disagree(self) -> bool:
        return self.applicable and self.our_pass != self.hash_pass


def run_kind(domain: DomainSpec, task: TaskSpec, kind: str) -> KindOutcome:
    """One attempt of ``kind`` on a fresh backend (no judge: rubrics stay unjudged, the state decides)."""
    agent = "golden" if kind == "golden" else f"check:{kind}"
    setup = AttemptSetup.from_config(domain, task, agent=agent, judge=None)
    plan = getattr(setup.agent, "plan", None)
    if plan is not None and not plan.applicable:
        return KindOutcome(domain.name, task.id, kind, applicable=False, note=plan.note)
    result = setup.run()
    evidence = ((result.extra.get("thinkingbox") or {}).get("effects") or {}).get(domain.name) or {}
    return KindOutcome(
        domain=domain.name,
        task_id=task.id,
        kind=kind,
        applicable=True,
        note=getattr(plan, "note", ""),
        status=result.status,
        verdict=result.verdict,
        our_pass=evidence.get("our_state_pass"),
        hash_pass=evidence.get("their_hash_pass"),
        declarations_verified=evidence.get("declarations_verified"),
        error=result.error,
    )


def run_kinds(
    domain: DomainSpec, tasks: Iterable[TaskSpec], kinds: Iterable[str] = RUN_KINDS
) -> list[KindOutcome]:
    return [run_kind(domain, task, kind) for task in tasks for kind in kinds]


def tally(outcomes: Iterable[KindOutcome]) -> dict[tuple[str, str], Counter]:
    """(domain, kind) -> counts of runs, n/a, our passes, hash passes, disagreements, infra errors."""
    table: dict[tuple[str, str], Counter] = {}
    for outcome in outcomes:
        counts = table.setdefault((outcome.domain, outcome.kind), Counter())
        if not outcome.applicable:
            counts["n/a"] += 1
            continue
        counts["runs"] += 1
        counts["infra"] += outcome.status != "done"
        counts["our_pass"] += bool(outcome.our_pass)
        counts["hash_pass"] += bool(outcome.hash_pass)
        counts["disagree"] += outcome.disagree
        counts["unverified"] += outcome.declarations_verified is not True
    return table
