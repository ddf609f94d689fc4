"""What grading an attempt produces (SPEC §2-§4). Plain JSON via to_dict/from_dict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard, get_args

from tb_engine.transcript import Transcript, shallow_fields

DiffKind = Literal["missing_effect", "extra_effect", "wrong_value"]
Status = Literal["queued", "running", "done", "infra_error", "cancelled"]
Termination = Literal["agent_done", "user_done", "max_turns", "timeout", "agent_error"]
# unjudged: a rubric the judge could not answer and nothing else failed (SPEC §2); excluded from metrics
Verdict = Literal["pass", "fail", "unjudged"]
DIFF_KINDS: tuple[DiffKind, ...] = get_args(DiffKind)
TERMINATIONS: tuple[Termination, ...] = get_args(Termination)


def is_termination(value: Any) -> TypeGuard[Termination]:
    """True when ``value`` is one of the attempt terminations (SPEC §2)."""
    return value in TERMINATIONS


MISSING = (
    None  # value of a cell/row that does not exist in a snapshot is represented as None + row_present flags
)


@dataclass(frozen=True)
class DiffItem:
    """One difference between SR and SG, classified against S0 (SPEC §3).

    ``field`` is None for a whole-row item (a row present in one state and absent in another);
    then initial/result/golden hold the whole row (dict) or None where absent.
    """

    kind: DiffKind
    table: str
    key: str  # printable row key, e.g. "20" or "order_id=ORD-1,line=2"
    field: str | None
    initial: Any
    result: Any
    golden: Any
    written_by: tuple[int, ...] = ()  # indexes of the attempt's tool calls that wrote this cell/row

    def to_dict(self) -> dict[str, Any]:
        data = shallow_fields(self)
        data["written_by"] = list(self.written_by)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DiffItem:
        return cls(**{**data, "written_by": tuple(data.get("written_by", ()))})


@dataclass(frozen=True)
class Effect:
    """One S0 -> SR change (what the attempt did, regardless of golden)."""

    op: Literal["insert", "update", "delete"]
    table: str
    key: str
    field: str | None
    before: Any
    after: Any
    written_by: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = shallow_fields(self)
        data["written_by"] = list(self.written_by)
        return data


@dataclass(frozen=True)
class CheckResult:
    kind: str
    description: str
    passed: bool
    detail: str = ""
    forbidden: bool = False
    target: str = ""  # what the check is about without row keys (tb_engine.signatures.check_target)

    def to_dict(self) -> dict[str, Any]:
        return shallow_fields(self)


@dataclass(frozen=True)
class RubricResult:
    question: str
    answer: bool | None  # None: unjudged (no judge, no keywords, unreadable answer, judge down)
    explanation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return shallow_fields(self)


@dataclass
class AttemptResult:
    """The full record of one attempt; the Django shell stores this as-is."""

    task_id: str
    task_hash: str
    status: Status
    termination: Termination | None = None
    verdict: Verdict | None = None
    transcript: Transcript = field(default_factory=Transcript)
    effects: list[Effect] = field(default_factory=list)  # S0 -> SR
    diff: list[DiffItem] = field(default_factory=list)  # SR vs SG, classified
    checks: list[CheckResult] = field(default_factory=list)
    rubrics: list[RubricResult] = field(default_factory=list)
    categories: list[str] = field(
        default_factory=list
    )  # sorted set of diff kinds + rubric_failed/check_failed
    clean_looking: bool = False
    error: str = ""  # infra error or agent error detail
    phase_ms: dict[str, float] = field(default_factory=dict)  # per runner phase
    duration_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)  # adapter evidence, e.g. ThinkingBox hash verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "task_hash": self.task_hash,
            "status": self.status,
            "termination": self.termination,
            "verdict": self.verdict,
            "transcript": self.transcript.to_dict(),
            "effects": [e.to_dict() for e in self.effects],
            "diff": [d.to_dict() for d in self.diff],
            "checks": [c.to_dict() for c in self.checks],
            "rubrics": [r.to_dict() for r in self.rubrics],
            "categories": list(self.categories),
            "clean_looking": self.clean_looking,
            "error": self.error,
            "phase_ms": dict(self.phase_ms),
            "duration_ms": self.duration_ms,
            "extra": self.extra,
        }
