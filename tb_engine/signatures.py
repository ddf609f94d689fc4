"""Failure signatures (SPEC §8): what a failed attempt did to the database, without its row keys.

The signature of a failed attempt is the sorted set of its diff items reduced to
(class, table, field or ``(row)``, tool that wrote it or ``-``) — the row key dropped, so the same
mistake on ticket 20 and on ticket 31 is one signature — plus its failed explicit checks and rubrics.
Attempts sharing a signature form a *cluster*; two signatures differing by exactly one element are
*related*.

Everything here reads the stored result (``AttemptResult.to_dict()``, read back through
``AttemptResult.from_dict``, or the stored parts a backfill selects), so the recording path and a
backfill over stored attempts compute the same thing. Beside the elements a
signature carries two phrases per element for people: one with this attempt's values ("left ticket
status open where golden has hold") and one without ("left ticket status unchanged where golden
changes it"), so a cluster whose attempts disagree on the values is still described truthfully.
Phrases never contain row keys and are not part of the digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache
from typing import Any, NamedTuple

from tb_engine.results import AttemptResult

ROW = "(row)"  # field-or-row for a whole-row item (a row present in one state and absent in another)
NO_TOOL = "-"  # no tool call of the attempt wrote the cell or row
UNNAMED = "(unnamed)"  # a failure category the stored result names but does not detail (e.g. imported rows)
CHECK_FAILED = "check_failed"
RUBRIC_FAILED = "rubric_failed"
RUBRIC_UNJUDGED = "rubric_unjudged"
# An injected fault (tb_engine.faults): (``fault_injected``, fault kind, committed or not, tool). It
# keeps apart attempts that failed the same way with and without a lost reply behind it.
FAULT_INJECTED = "fault_injected"
DIFF_KINDS = ("wrong_value", "missing_effect", "extra_effect")
# Bumped whenever the elements or the digest change, so stored signatures can be recomputed.
SIGNATURE_VERSION = 2  # 2: a fault injected by the campaign's fault plan is an element
_SHORT = 40


class Element(NamedTuple):
    """One element of a signature: (class, table, field-or-row, tool) for a diff item.

    For a failed check: (``check_failed``, check kind, what it checks without row keys, ``-``);
    for a failed (or unjudged) rubric: (``rubric_failed``/``rubric_unjudged``, ``""``, question, ``-``).
    A plain tuple underneath: hashing and sorting thousands of them per second is cheap.
    """

    kind: str
    table: str
    target: str
    tool: str = NO_TOOL

    def as_list(self) -> list[str]:
        return list(self)

    @property
    def category(self) -> str:
        """The failure category (SPEC §3) this element belongs to."""
        return RUBRIC_FAILED if self.kind == RUBRIC_UNJUDGED else self.kind


@dataclass(frozen=True)
class Signature:
    """A failed attempt's signature: elements (sorted, unique), their digest and their phrases."""

    elements: tuple[Element, ...]
    phrases: tuple[str, ...]  # per element, with this attempt's values
    generic: tuple[str, ...]  # per element, without values

    @cached_property
    def digest(self) -> str:
        return _digest_of_sorted(self.elements)

    def items(self) -> list[list[str]]:
        """JSON for storage: per element [kind, table, target, tool, phrase, generic phrase]."""
        return [[*e.as_list(), p, g] for e, p, g in zip(self.elements, self.phrases, self.generic)]

    @classmethod
    def from_items(cls, items: Iterable[Sequence[str]]) -> Signature:
        """The inverse of items() (a stored signature)."""
        rows = [tuple(item) for item in items]
        return cls(
            elements=tuple(Element(*row[:4]) for row in rows),
            phrases=tuple(row[4] if len(row) > 4 else "" for row in rows),
            generic=tuple(row[5] if len(row) > 5 else "" for row in rows),
        )

    def describe(self, *, with_values: bool = True) -> str:
        """Plain words for the whole signature, e.g. "left ticket status open where golden has hold; no refund…"."""
        phrases = self.phrases if with_values else self.generic
        return describe(phrases)


def describe(phrases: Iterable[str]) -> str:
    """Join element phrases into one description."""
    text = "; ".join(phrase for phrase in phrases if phrase)
    return text or "no recorded state difference, check or rubric (the verdict came from elsewhere)"


def digest_of(elements: Iterable[Element]) -> str:
    """The stable id of a set of elements: 32 hex digits of SHA-256 over their sorted JSON."""
    ordered = sorted(set(elements))
    blob = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False)  # tuples encode as lists
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@lru_cache(maxsize=65536)
def _digest_of_sorted(elements: tuple[Element, ...]) -> str:
    """digest_of for elements already sorted and unique (a Signature's), cached: a backfill meets the same
    signature many times."""
    return digest_of(elements)


def related(a: Iterable[Element], b: Iterable[Element]) -> bool:
    """SPEC §8: two signatures are related when they differ by exactly one element."""
    return len(set(a) ^ set(b)) == 1


def neighbour_digests(elements: Iterable[Element]) -> list[str]:
    """Digests of the signatures one element smaller (each element left out once).

    Two signatures are related iff one of them lists the other's digest here, so a set of clusters
    can be linked in one pass without comparing every pair.
    """
    ordered = sorted(set(elements))
    return [digest_of(ordered[:i] + ordered[i + 1 :]) for i in range(len(ordered))]


# --- From a stored result --------------------------------------------------------------------


def signature_of_result(result: Mapping[str, Any]) -> Signature | None:
    """The signature of a stored failed attempt (``AttemptResult.to_dict()``); None when it did not fail.

    The result is read through ``AttemptResult.from_dict``: one of a format this engine does not
    read raises ResultFormatError instead of yielding a wrong signature.
    """
    return signature_of_attempt(AttemptResult.from_dict(result))


def signature_of_attempt(result: AttemptResult) -> Signature | None:
    """The signature of a failed attempt; None when it did not fail (same as its stored result's)."""
    if result.status != "done" or result.verdict != "fail":
        return None
    return signature_from_parts(
        diff=[item.to_dict() for item in result.diff],
        checks=[check.to_dict() for check in result.checks],
        rubrics=[rubric.to_dict() for rubric in result.rubrics],
        categories=result.categories,
        tools={call.index: call.name for call in result.transcript.tool_calls},
        faults=fired_faults(result.extra),
    )


def fired_faults(extra: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The faults a fault plan injected into the attempt (``extra["faults"]["fired"]``; [] without a plan)."""
    record = extra.get("faults") if isinstance(extra, Mapping) else None
    fired = record.get("fired") if isinstance(record, Mapping) else None
    return [fault for fault in fired or () if isinstance(fault, Mapping)]


def signature_from_parts(
    *,
    diff: Iterable[Mapping[str, Any]],
    checks: Iterable[Mapping[str, Any]],
    rubrics: Iterable[Mapping[str, Any]],
    categories: Iterable[str],
    tools: Mapping[int, str] | Sequence[str],
    check_targets: Sequence[str] | None = None,
    faults: Iterable[Mapping[str, Any] | Sequence[Any]] = (),
) -> Signature:
    """The signature from the parts of a stored result a backfill can read without the transcript text.

    ``tools`` maps tool-call index to tool name. ``check_targets`` names the task's checks by
    position when the stored check results predate their ``target`` field. ``faults`` are the
    injected faults that fired (the stored records, or [kind, committed, tool] as a backfill reads
    them): each is an element, so a failure behind a lost reply is its own cluster.
    """
    names = dict(enumerate(tools)) if isinstance(tools, Sequence) else dict(tools)
    found: dict[Element, tuple[str, str]] = {}

    def add(element: Element, phrase: str, generic: str) -> None:
        # Several items can reduce to one element; keep the smallest phrase so the choice does not
        # depend on item order or row keys.
        previous = found.get(element)
        if previous is None or (phrase, generic) < previous:
            found[element] = (phrase, generic)

    for item in diff:
        element = _diff_element(item, names)
        add(element, *_diff_phrases(element, item))
    for position, check in enumerate(checks):
        if check.get("passed"):
            continue
        target = str(check.get("target") or "")
        if not target and check_targets is not None and position < len(check_targets):
            target = check_targets[position]
        kind = str(check.get("kind") or "")
        description = str(check.get("description") or "")
        element = Element(CHECK_FAILED, kind, target or description or UNNAMED)
        add(
            element,
            f"failed check: {_shorten(description or element.target, 80)}",
            f"failed check {kind} on {element.target}" if target else f"failed check: {element.target}",
        )
    for rubric in rubrics:
        answer = rubric.get("answer")
        if answer is True:
            continue
        question = str(rubric.get("question") or UNNAMED)
        kind = RUBRIC_FAILED if answer is False else RUBRIC_UNJUDGED
        phrase = ("rubric not met: " if answer is False else "rubric not judged: ") + _shorten(question, 80)
        add(Element(kind, "", question), phrase, phrase)
    for fault in faults:
        if isinstance(fault, Mapping):
            fault_kind, committed, tool = fault.get("kind"), fault.get("committed"), fault.get("tool")
        else:
            fault_kind, committed, tool = (list(fault) + [None, None, None])[:3]
        state = "committed" if committed else "not committed"
        element = Element(FAULT_INJECTED, str(fault_kind or UNNAMED), state, str(tool or NO_TOOL))
        phrase = f"injected {element.table.replace('_', ' ')} on {element.tool} ({state})"
        add(element, phrase, phrase)
    present = {element.category for element in found}
    for category in (CHECK_FAILED, RUBRIC_FAILED):
        if category in categories and category not in present:
            phrase = "a check failed" if category == CHECK_FAILED else "a rubric was not met"
            add(Element(category, "", UNNAMED), phrase, phrase)
    ordered = sorted(found)
    return Signature(
        elements=tuple(ordered),
        phrases=tuple(found[e][0] for e in ordered),
        generic=tuple(found[e][1] for e in ordered),
    )


def check_target(kind: str, params: Mapping[str, Any], description: str = "") -> str:
    """What a check is about, without row keys: ``tickets.status,priority``, ``refunds[order_id]``, ``refunds``."""
    table = str(params.get("table") or "")
    if kind == "row_equals":
        return f"{table}.{','.join(sorted(str(f) for f in (params.get('fields') or {})))}"
    if kind == "row_count":
        where = sorted(str(k) for k in (params.get("where") or {}))
        return f"{table}[{','.join(where)}]" if where else table
    if table:
        return table
    return description or kind


def _diff_element(item: Mapping[str, Any], tools: Mapping[int, str]) -> Element:
    writers = sorted({tools.get(int(i), "") for i in item.get("written_by") or ()} - {""})
    target = item.get("field")
    return Element(
        str(item.get("kind") or ""),
        str(item.get("table") or ""),
        str(target) if target is not None else ROW,
        "+".join(writers) or NO_TOOL,
    )


def _diff_phrases(element: Element, item: Mapping[str, Any]) -> tuple[str, str]:
    initial, result, golden = item.get("initial"), item.get("result"), item.get("golden")
    if element.target == ROW:
        return _row_phrases(element, initial is None, result is None, golden is None)
    return _cell_phrases(element, short(initial), short(result), short(golden))


@lru_cache(maxsize=4096)
def _row_phrases(element: Element, no_initial: bool, no_result: bool, no_golden: bool) -> tuple[str, str]:
    via = f" via {element.tool}" if element.tool != NO_TOOL else ""
    phrase = _row_phrase(element.kind, noun(element.table), no_initial, no_result, no_golden) + via
    return phrase, phrase


@lru_cache(maxsize=65536)
def _cell_phrases(element: Element, initial: str, result: str, golden: str) -> tuple[str, str]:
    """Both phrases of a cell item (cached: a backfill meets the same mistake many times)."""
    via = f" via {element.tool}" if element.tool != NO_TOOL else ""
    where = f"{noun(element.table)} {element.target.replace('_', ' ')}"
    if element.kind == "missing_effect":
        return (
            f"left {where} {initial} where golden has {golden}",
            f"left {where} unchanged where golden changes it",
        )
    if element.kind == "extra_effect":
        return (
            f"changed {where} from {initial} to {result}{via}, which golden leaves alone",
            f"changed {where}{via}, which golden leaves alone",
        )
    return (
        f"set {where} to {result}{via} where golden has {golden}",
        f"set {where}{via} to a value other than golden's",
    )


def _row_phrase(kind: str, thing: str, no_initial: bool, no_result: bool, no_golden: bool) -> str:
    if kind == "missing_effect":
        return f"no {thing} where golden creates one" if no_initial else f"kept the {thing} golden deletes"
    if kind == "extra_effect":
        return f"created an extra {thing}" if no_initial else f"deleted a {thing} golden keeps"
    if no_result:
        return f"deleted the {thing} golden changes"
    return f"left a {thing} where golden has none" if no_golden else f"left the {thing} unlike golden's"


@cache
def noun(table: str) -> str:
    """A table name as a singular noun for phrases: ``access_grants`` -> "access grant"."""
    words = table.replace("_", " ").strip()
    for plural, singular in (("ies", "y"), ("sses", "ss"), ("uses", "us"), ("xes", "x"), ("ches", "ch")):
        if words.endswith(plural):
            return words[: -len(plural)] + singular
    if words.endswith("s") and not words.endswith(("ss", "us")):
        return words[:-1]
    return words


def short(value: Any) -> str:
    """A cell value for a phrase: text as is (cut at 40 characters), empty for NULL, numbers and JSON compact."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _shorten(value, _SHORT) if value else '""'
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    return _shorten(str(text), _SHORT)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
