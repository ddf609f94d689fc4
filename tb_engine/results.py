"""What grading an attempt produces (SPEC §2-§4). Plain JSON via to_dict/from_dict.

The JSON is the stored result: it carries ``format_version`` (FORMAT_VERSION), and
``AttemptResult.from_dict`` reads it back into the typed objects or raises ResultFormatError
naming the field and the version; docs/engine.md describes the format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeGuard, get_args

from tb_engine import result_format as read
from tb_engine.result_format import ResultFormatError
from tb_engine.transcript import Transcript, shallow_fields

# The stored result's format. Bump it when a field changes meaning or shape (adding an optional
# field with a default does not need it), and teach AttemptResult.from_dict to read the old one.
FORMAT_VERSION: Final = 1
# Results stored before the format had a version carry no format_version and are version 1.
UNVERSIONED_FORMAT: Final = 1
READABLE_FORMATS: Final = (1,)

DiffKind = Literal["missing_effect", "extra_effect", "wrong_value"]
Status = Literal["queued", "running", "done", "infra_error", "cancelled"]
Termination = Literal["agent_done", "user_done", "max_turns", "timeout", "agent_error"]
# unjudged: a rubric the judge could not answer and nothing else failed (SPEC §2); excluded from metrics
Verdict = Literal["pass", "fail", "unjudged"]
EffectOp = Literal["insert", "update", "delete"]
DIFF_KINDS: tuple[DiffKind, ...] = get_args(DiffKind)
TERMINATIONS: tuple[Termination, ...] = get_args(Termination)
STATUSES: tuple[Status, ...] = get_args(Status)
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
EFFECT_OPS: tuple[EffectOp, ...] = get_args(EffectOp)


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
    def from_dict(cls, data: Any) -> DiffItem:
        """Read a stored diff item; raises ResultFormatError naming the field when it is not one."""
        data = read.json_object(data, known=cls.__dataclass_fields__)
        return cls(
            kind=read.choice(data, "kind", DIFF_KINDS),
            table=read.text(data, "table"),
            key=read.text(data, "key"),
            field=read.optional_text(data, "field"),
            initial=read.anything(data, "initial"),
            result=read.anything(data, "result"),
            golden=read.anything(data, "golden"),
            written_by=read.integers(data, "written_by"),
        )


@dataclass(frozen=True)
class Effect:
    """One S0 -> SR change (what the attempt did, regardless of golden)."""

    op: EffectOp
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

    @classmethod
    def from_dict(cls, data: Any) -> Effect:
        """Read a stored effect; raises ResultFormatError naming the field when it is not one."""
        data = read.json_object(data, known=cls.__dataclass_fields__)
        return cls(
            op=read.choice(data, "op", EFFECT_OPS),
            table=read.text(data, "table"),
            key=read.text(data, "key"),
            field=read.optional_text(data, "field"),
            before=read.anything(data, "before"),
            after=read.anything(data, "after"),
            written_by=read.integers(data, "written_by"),
        )


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

    @classmethod
    def from_dict(cls, data: Any) -> CheckResult:
        """Read a stored check result; raises ResultFormatError naming the field when it is not one."""
        data = read.json_object(data, known=cls.__dataclass_fields__)
        return cls(
            kind=read.text(data, "kind"),
            description=read.text(data, "description"),
            passed=read.boolean(data, "passed"),
            detail=read.text(data, "detail", ""),
            forbidden=read.boolean(data, "forbidden", False),
            target=read.text(data, "target", ""),
        )


@dataclass(frozen=True)
class RubricResult:
    question: str
    answer: bool | None  # None: unjudged (no judge, no keywords, unreadable answer, judge down)
    explanation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return shallow_fields(self)

    @classmethod
    def from_dict(cls, data: Any) -> RubricResult:
        """Read a stored rubric result; raises ResultFormatError naming the field when it is not one."""
        data = read.json_object(data, known=cls.__dataclass_fields__)
        return cls(
            question=read.text(data, "question"),
            answer=read.optional_boolean(data, "answer"),
            explanation=read.text(data, "explanation", ""),
        )


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
            "format_version": FORMAT_VERSION,
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

    @classmethod
    def from_dict(cls, data: Any) -> AttemptResult:
        """Read a stored result (``to_dict``'s JSON, of any format version this engine reads).

        Raises ResultFormatError naming the field and the format version when ``data`` is not a
        result of a readable format: an unknown version is refused, never read as if it were known.
        """
        version = _format_version(data)
        try:
            data = read.json_object(data, known=_RESULT_KEYS)
            return cls(
                task_id=read.text(data, "task_id"),
                task_hash=read.text(data, "task_hash"),
                status=read.choice(data, "status", STATUSES),
                termination=read.optional_choice(data, "termination", TERMINATIONS),
                verdict=read.optional_choice(data, "verdict", VERDICTS),
                transcript=read.nested(data, "transcript", Transcript.from_dict, Transcript),
                effects=read.nested_list(data, "effects", Effect.from_dict),
                diff=read.nested_list(data, "diff", DiffItem.from_dict),
                checks=read.nested_list(data, "checks", CheckResult.from_dict),
                rubrics=read.nested_list(data, "rubrics", RubricResult.from_dict),
                categories=read.strings(data, "categories"),
                clean_looking=read.boolean(data, "clean_looking", False),
                error=read.text(data, "error", ""),
                phase_ms=read.numbers_by_name(data, "phase_ms"),
                duration_ms=read.number(data, "duration_ms", 0.0),
                extra=read.free_object(data, "extra"),
            )
        except ResultFormatError as exc:
            raise exc.of_version(version) from None


_RESULT_KEYS = frozenset(AttemptResult.__dataclass_fields__) | {"format_version"}


def _format_version(data: Any) -> int:
    """The format version a stored result claims (absent: stored before versions, so version 1)."""
    if not isinstance(data, Mapping):
        raise ResultFormatError(f"must be an object, got {read.json_type(data)}")
    version = data.get("format_version", UNVERSIONED_FORMAT)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ResultFormatError(f"must be an integer, got {read.json_type(version)}", path="format_version")
    if version not in READABLE_FORMATS:
        readable = ", ".join(str(v) for v in READABLE_FORMATS)
        raise ResultFormatError(
            f"is {version}, a format this engine does not read (it reads version {readable})",
            path="format_version",
        )
    return version
