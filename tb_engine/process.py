"""Process risk: what the end state cannot see, read from an attempt's per-call write log.

A state check compares SR with SG; an attempt that changed a refund and changed it back, touched
a customer it had no business with and put everything back, or wrote before it looked passes it.
This module finds three kinds of *process finding* (docs/process_risk.md). They never change the
verdict: a passing attempt with findings is "passed with process risk", shown beside it.

* ``write_reverted`` — a cell changed and later changed back to a value it held before, or a row
  created and later deleted (or deleted and re-created), within the attempt;
* ``outside_footprint`` — a write to a row or table the golden trajectory never touches (S0 -> SG),
  even when undone later; tables whose keys are made on insert are compared by table;
* ``write_before_required_step`` — a declarative *process rule* broken: a state-changing call
  (``before``) with no earlier successful call that the rule requires (``require``), optionally for
  the same key (``same_argument``).

The write log comes, best first, from the backend's value log (``WriteEntry`` with old/new values:
the SQLite sandbox), from its per-call writes map (cells and rows each call wrote: reverts are then
the written places that show no net effect), or — for attempts stored before either was kept —
from the net S0 -> SR effects' ``written_by`` (no revert can be seen; ``coverage`` says which).

Process rules live in a YAML file beside a built-in domain (``process_rules.yaml``) or in a side
file for an imported ThinkingBox scenario (never editing its files); both are parsed, never run.
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from tb_engine.results import Effect
from tb_engine.textfile import read_text
from tb_engine.transcript import ToolCall
from tb_engine.yaml_bounded import load_yaml

FindingKind = Literal["write_reverted", "outside_footprint", "write_before_required_step"]
FINDING_KINDS: Final[tuple[FindingKind, ...]] = (
    "write_reverted",
    "outside_footprint",
    "write_before_required_step",
)
FINDING_LABELS: Final[dict[str, str]] = {
    "write_reverted": "write reverted",
    "outside_footprint": "outside the golden footprint",
    "write_before_required_step": "write before required step",
}
# How complete the write log behind a report is (best first).
Coverage = Literal["value_log", "writes", "net_effects"]
RULES_FILE: Final = "process_rules.yaml"
# A directory of side files ``<domain name>.yaml`` for imported domains whose folder is read-only.
RULES_DIR_ENV: Final = "TB_PROCESS_RULES_DIR"
ANY_TABLE: Final = "*"
PROCESS_FORMAT: Final = 1


class ProcessRulesError(ValueError):
    """A process-rules file that is not in the format (names the file and the rule)."""


# --- The write log --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteEntry:
    """One logged write of one tool call, in the order the database saw it.

    ``op`` is insert/update/delete from a value log; ``row`` when only "this call inserted or
    deleted the row" is known (a writes map). ``old``/``new`` are an update's values (value log only).
    """

    call: int
    table: str
    key: str
    field: str | None
    op: Literal["insert", "update", "delete", "row"]
    old: Any = None
    new: Any = None

    def to_list(self) -> list[Any]:
        return [self.call, self.table, self.key, self.field, self.op, self.old, self.new]

    @classmethod
    def from_list(cls, data: Sequence[Any]) -> WriteEntry:
        call, table, key, column, op, old, new = data
        return cls(int(call), str(table), str(key), column, op, old, new)


def entries_from_writes(writes: Mapping[tuple[str, str, str | None], Iterable[int]]) -> list[WriteEntry]:
    """A writes map (place -> calls) as entries in call order (no values: reverts by net effect)."""
    entries = [
        WriteEntry(call, table, key, column, "row" if column is None else "update")
        for (table, key, column), calls in writes.items()
        for call in calls
    ]
    entries.sort(key=lambda e: (e.call, e.table, e.key, e.field or ""))
    return entries


def entries_from_effects(effects: Iterable[Effect]) -> list[WriteEntry]:
    """The net effects' attribution as entries (what a result stored before write logs can offer)."""
    entries = [
        WriteEntry(call, e.table, e.key, e.field, "row" if e.field is None else "update")
        for e in effects
        for call in e.written_by
    ]
    entries.sort(key=lambda e: (e.call, e.table, e.key, e.field or ""))
    return entries


# --- The golden footprint -------------------------------------------------------------------------


@dataclass(frozen=True)
class Footprint:
    """Rows (and tables) the golden trajectory changes, S0 -> SG; ``by_table`` tables compare by table."""

    tables: frozenset[str] = frozenset()
    rows: frozenset[tuple[str, str]] = frozenset()
    by_table: frozenset[str] = frozenset()

    def covers(self, table: str, key: str) -> bool:
        if table not in self.tables:
            return False
        return table in self.by_table or (table, key) in self.rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": sorted(self.tables),
            "rows": sorted([t, k] for t, k in self.rows),
            "by_table": sorted(self.by_table),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Footprint:
        return cls(
            frozenset(data.get("tables") or ()),
            frozenset((str(t), str(k)) for t, k in data.get("rows") or ()),
            frozenset(data.get("by_table") or ()),
        )


def golden_footprint(golden_effects: Iterable[Effect], generated_key_tables: Iterable[str] = ()) -> Footprint:
    """The footprint of the golden trajectory from its S0 -> SG effects (tb_engine.diff.effects)."""
    rows = {(e.table, e.key) for e in golden_effects}
    return Footprint(frozenset(t for t, _ in rows), frozenset(rows), frozenset(generated_key_tables))


# --- Process rules --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessRule:
    """``before`` a call that writes ``before_tables`` (``*``: any) or is one of ``before_tools``,
    an earlier successful call of ``require_tools`` or one that wrote ``require_tables``; with
    ``same_argument`` (required call's argument, triggering call's argument) for the same key."""

    id: str
    description: str
    before_tables: tuple[str, ...] = ()
    before_tools: tuple[str, ...] = ()
    require_tools: tuple[str, ...] = ()
    require_tables: tuple[str, ...] = ()
    same_argument: tuple[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        before: dict[str, Any] = {}
        if self.before_tables:
            before["writes"] = list(self.before_tables)
        if self.before_tools:
            before["tools"] = list(self.before_tools)
        require: dict[str, Any] = {}
        if self.require_tools:
            require["tools"] = list(self.require_tools)
        if self.require_tables:
            require["writes"] = list(self.require_tables)
        if self.same_argument is not None:
            required, trigger = self.same_argument
            require["same_argument"] = {"required": required, "before": trigger}
        return {"id": self.id, "description": self.description, "before": before, "require": require}


def _names(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ProcessRulesError(f"{where}: expected a name or a list of names")
    return tuple(value)


def _mapping(value: Any, where: str, known: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProcessRulesError(f"{where}: expected a mapping")
    unknown = sorted(set(value) - known)
    if unknown:
        raise ProcessRulesError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return value


def parse_rules(data: Any, *, source: str = "") -> tuple[ProcessRule, ...]:
    """Rules from parsed YAML ``{rules: [...]}``; unknown fields are errors (typos never pass)."""
    prefix = f"{source}: " if source else ""
    try:
        document = _mapping(data if data is not None else {}, "document", {"rules"})
        entries = document.get("rules") or []
        if not isinstance(entries, list):
            raise ProcessRulesError("rules: expected a list")
        rules, seen = [], set()
        for position, entry in enumerate(entries):
            where = f"rules[{position}]"
            entry = _mapping(entry, where, {"id", "description", "before", "require"})
            rule_id = entry.get("id")
            if not isinstance(rule_id, str) or not rule_id:
                raise ProcessRulesError(f"{where}.id: required text")
            if rule_id in seen:
                raise ProcessRulesError(f"{where}.id: duplicate rule id {rule_id!r}")
            seen.add(rule_id)
            where = f"rule {rule_id}"
            before = _mapping(entry.get("before"), f"{where}.before", {"writes", "tools"})
            require = _mapping(entry.get("require"), f"{where}.require", {"writes", "tools", "same_argument"})
            before_tables = _names(before["writes"], f"{where}.before.writes") if "writes" in before else ()
            before_tools = _names(before["tools"], f"{where}.before.tools") if "tools" in before else ()
            if not before_tables and not before_tools:
                raise ProcessRulesError(f"{where}.before: needs writes or tools")
            require_tools = _names(require["tools"], f"{where}.require.tools") if "tools" in require else ()
            require_tables = (
                _names(require["writes"], f"{where}.require.writes") if "writes" in require else ()
            )
            if not require_tools and not require_tables:
                raise ProcessRulesError(f"{where}.require: needs tools or writes")
            same = require.get("same_argument")
            same_argument: tuple[str, str] | None = None
            if isinstance(same, str) and same:
                same_argument = (same, same)
            elif same is not None:
                pair = _mapping(same, f"{where}.require.same_argument", {"required", "before"})
                required, trigger = pair.get("required"), pair.get("before")
                if not isinstance(required, str) or not isinstance(trigger, str):
                    raise ProcessRulesError(f"{where}.require.same_argument: needs required and before")
                same_argument = (required, trigger)
            description = entry.get("description") or ""
            if not isinstance(description, str):
                raise ProcessRulesError(f"{where}.description: expected text")
            rules.append(
                ProcessRule(
                    rule_id,
                    description.strip(),
                    before_tables,
                    before_tools,
                    require_tools,
                    require_tables,
                    same_argument,
                )
            )
        return tuple(rules)
    except ProcessRulesError as exc:
        raise ProcessRulesError(prefix + str(exc)) from None


def load_rules_file(path: str | Path) -> tuple[ProcessRule, ...]:
    """Parse one rules file (YAML, safe loading; never executed)."""
    text = read_text(path, "process rules")
    try:
        data = load_yaml(text)
    except Exception as exc:  # a YAML error names the line
        raise ProcessRulesError(f"{path}: not valid YAML: {exc}") from None
    return parse_rules(data, source=str(path))


_rules_cache: dict[str, tuple[float, tuple[ProcessRule, ...]]] = {}
_rules_lock = threading.Lock()


def rules_path_for(domain_name: str, source: str, backend: str, mcp: Mapping[str, Any] | None) -> Path | None:
    """Where a domain's rules are: beside a built-in ``domain.yaml``; for an imported (MCP) domain the
    side file its launch configuration names (``process_rules``), else ``$TB_PROCESS_RULES_DIR/<name>.yaml``,
    else ``<scenario file>.process_rules.yaml`` beside the imported file."""
    if backend != "mcp":
        if not source:
            return None
        found = Path(source.split(":")[0]).parent / RULES_FILE
        return found if found.is_file() else None
    named = (mcp or {}).get("process_rules")
    if isinstance(named, str) and named:
        return Path(named)
    directory = os.environ.get(RULES_DIR_ENV)
    if directory and (Path(directory) / f"{domain_name}.yaml").is_file():
        return Path(directory) / f"{domain_name}.yaml"
    if source:
        beside = Path(source.split(":")[0])
        side = beside.with_name(beside.name + ".process_rules.yaml")
        if side.is_file():
            return side
    return None


def domain_rules(domain: Any) -> tuple[ProcessRule, ...]:
    """The process rules of a DomainSpec (cached per file and modification time; none when no file)."""
    path = rules_path_for(domain.name, domain.source, domain.backend, domain.mcp)
    if path is None:
        return ()
    stamp = path.stat().st_mtime
    key = str(path)
    with _rules_lock:
        cached = _rules_cache.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    rules = load_rules_file(path)
    with _rules_lock:
        _rules_cache[key] = (stamp, rules)
    return rules


# --- Findings and the report ----------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One process finding; ``calls`` are the transcript steps it marks (the offending call first)."""

    kind: FindingKind
    calls: tuple[int, ...]
    detail: str
    table: str = ""
    key: str = ""
    field: str | None = None
    rule: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "calls": list(self.calls),
            "detail": self.detail,
            "table": self.table,
            "key": self.key,
            "field": self.field,
            "rule": self.rule,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        kind = data["kind"]
        if kind not in FINDING_KINDS:
            raise ValueError(f"unknown process finding kind {kind!r}")
        return cls(
            kind=kind,
            calls=tuple(int(c) for c in data.get("calls") or ()),
            detail=str(data.get("detail") or ""),
            table=str(data.get("table") or ""),
            key=str(data.get("key") or ""),
            field=data.get("field"),
            rule=str(data.get("rule") or ""),
        )


@dataclass
class ProcessReport:
    """An attempt's process analysis, stored in its result's ``extra["process"]``."""

    findings: list[Finding] = field(default_factory=list)
    coverage: Coverage = "value_log"
    footprint_known: bool = True
    rules: tuple[str, ...] = ()  # ids of the rules checked

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = dict.fromkeys(FINDING_KINDS, 0)
        for finding in self.findings:
            found[finding.kind] += 1
        return found

    def kinds(self) -> list[str]:
        return sorted({f.kind for f in self.findings})

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PROCESS_FORMAT,
            "findings": [f.to_dict() for f in self.findings],
            "coverage": self.coverage,
            "footprint_known": self.footprint_known,
            "rules": list(self.rules),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessReport:
        return cls(
            findings=[Finding.from_dict(f) for f in data.get("findings") or ()],
            coverage=data.get("coverage") or "net_effects",
            footprint_known=bool(data.get("footprint_known", True)),
            rules=tuple(data.get("rules") or ()),
        )


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _reverted_by_value(entries: Sequence[WriteEntry]) -> list[Finding]:
    """Reverts seen in a value log: a row's insert/delete toggled back, a cell back at an earlier value."""
    findings: list[Finding] = []
    row_ops: dict[tuple[str, str], list[WriteEntry]] = defaultdict(list)
    cells: dict[tuple[str, str, str], list[WriteEntry]] = defaultdict(list)
    for entry in entries:
        if entry.op in ("insert", "delete"):
            row_ops[(entry.table, entry.key)].append(entry)
        elif entry.op == "update" and entry.field is not None:
            cells[(entry.table, entry.key, entry.field)].append(entry)
    reverted_rows = set()
    for (table, key), ops in row_ops.items():
        for first, later in zip(ops, ops[1:]):
            if first.op != later.op:
                what = "created then deleted" if first.op == "insert" else "deleted then re-created"
                findings.append(
                    Finding(
                        "write_reverted",
                        (later.call, first.call),
                        f"{table}[{key}]: row {what} (calls #{first.call} and #{later.call})",
                        table,
                        key,
                    )
                )
                reverted_rows.add((table, key))
                break
    for (table, key, column), updates in cells.items():
        if (table, key) in reverted_rows:
            continue  # the row finding says it
        values = [updates[0].old] + [u.new for u in updates]
        for position in range(2, len(values)):
            if values[position] in values[: position - 1]:
                back, away = updates[position - 1], updates[values.index(values[position])]
                findings.append(
                    Finding(
                        "write_reverted",
                        (back.call, away.call),
                        f"{table}[{key}].{column}: changed by call #{away.call} and changed back to "
                        f"{_short(values[position])} by call #{back.call}",
                        table,
                        key,
                        column,
                    )
                )
                break
    return findings


def _reverted_by_net_effect(entries: Sequence[WriteEntry], effects: Iterable[Effect]) -> list[Finding]:
    """Reverts from a writes map: a written row or cell that shows no net S0 -> SR effect."""
    net_rows = {(e.table, e.key) for e in effects}
    net_cells = {(e.table, e.key, e.field) for e in effects if e.field is not None}
    net_row_ops = {(e.table, e.key) for e in effects if e.field is None}
    places: dict[tuple[str, str, str | None], list[int]] = defaultdict(list)
    for entry in entries:
        places[(entry.table, entry.key, entry.field)].append(entry.call)
    findings = []
    reverted_rows = set()
    for (table, key, column), calls in places.items():
        if column is None and (table, key) not in net_rows:
            reverted_rows.add((table, key))
            findings.append(
                Finding(
                    "write_reverted",
                    tuple(sorted(set(calls), reverse=True)),
                    f"{table}[{key}]: row inserted or deleted by call(s) "
                    f"{', '.join(f'#{c}' for c in sorted(set(calls)))} and back as it was at the end",
                    table,
                    key,
                )
            )
    for (table, key, column), calls in places.items():
        if column is None or (table, key) in reverted_rows:
            continue
        if (table, key, column) not in net_cells and (table, key) not in net_row_ops:
            findings.append(
                Finding(
                    "write_reverted",
                    tuple(sorted(set(calls), reverse=True)),
                    f"{table}[{key}].{column}: written by call(s) "
                    f"{', '.join(f'#{c}' for c in sorted(set(calls)))} and back at its initial value",
                    table,
                    key,
                    column,
                )
            )
    return findings


def _outside_footprint(entries: Sequence[WriteEntry], footprint: Footprint) -> list[Finding]:
    calls_by_row: dict[tuple[str, str], list[int]] = {}
    for entry in entries:
        if not footprint.covers(entry.table, entry.key):
            calls_by_row.setdefault((entry.table, entry.key), []).append(entry.call)
    findings = []
    for (table, key), calls in calls_by_row.items():
        distinct = sorted(set(calls))
        where = "a table" if table not in footprint.tables else "a row"
        findings.append(
            Finding(
                "outside_footprint",
                tuple(distinct),
                f"{table}[{key}]: written by call{'s' if len(distinct) > 1 else ''} "
                f"{', '.join(f'#{c}' for c in distinct)}; the golden trajectory never touches {where} "
                f"{'of ' + table if where == 'a row' else table}",
                table,
                key,
            )
        )
    return findings


def _arguments(call: ToolCall) -> dict[str, Any]:
    arguments = call.arguments
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and str(a) == str(b)


def _rule_findings(
    rule: ProcessRule, calls: Sequence[ToolCall], tables_by_call: Mapping[int, set[str]]
) -> list[Finding]:
    findings = []
    for call in calls:
        if call.error is not None:
            continue
        written = tables_by_call.get(call.index, set())
        changed = bool(written) or call.changed_state
        triggered = (call.name in rule.before_tools and changed) or (
            (ANY_TABLE in rule.before_tables and changed) or bool(written & set(rule.before_tables))
        )
        if not triggered:
            continue
        key_value = None
        if rule.same_argument is not None:
            key_value = _arguments(call).get(rule.same_argument[1])
        satisfied = False
        for earlier in calls:
            if earlier.index >= call.index:
                break
            if earlier.error is not None:
                continue
            does = earlier.name in rule.require_tools or bool(
                tables_by_call.get(earlier.index, set()) & set(rule.require_tables)
            )
            if not does:
                continue
            if key_value is not None and rule.same_argument is not None:
                if not _same(_arguments(earlier).get(rule.same_argument[0]), key_value):
                    continue
            satisfied = True
            break
        if satisfied:
            continue
        required = " or ".join([*rule.require_tools, *(f"a write to {t}" for t in rule.require_tables)])
        same = (
            f" with {rule.same_argument[0]}={key_value}"
            if key_value is not None and rule.same_argument
            else ""
        )
        findings.append(
            Finding(
                "write_before_required_step",
                (call.index,),
                f"call #{call.index} ({call.name}) came before any {required}{same}: rule {rule.id}",
                rule=rule.id,
            )
        )
    return findings


def analyse(
    *,
    calls: Sequence[ToolCall],
    effects: Sequence[Effect],
    footprint: Footprint | None,
    rules: Sequence[ProcessRule] = (),
    value_log: Sequence[WriteEntry] | None = None,
    writes: Mapping[tuple[str, str, str | None], Iterable[int]] | None = None,
) -> ProcessReport:
    """An attempt's process findings. ``value_log`` (best), else ``writes``, else ``effects`` give the
    write log; ``footprint`` None means the golden footprint is unknown (no outside-footprint check).
    Never reads or changes the verdict."""
    coverage: Coverage
    if value_log is not None:
        entries, coverage = list(value_log), "value_log"
        reverted = _reverted_by_value(entries)
    elif writes:
        entries, coverage = entries_from_writes(writes), "writes"
        reverted = _reverted_by_net_effect(entries, effects)
    else:
        entries, coverage = entries_from_effects(effects), "net_effects"
        reverted = []  # the net effects cannot show a write that was undone
    tables_by_call: dict[int, set[str]] = defaultdict(set)
    for entry in entries:
        tables_by_call[entry.call].add(entry.table)
    findings = list(reverted)
    if footprint is not None:
        findings.extend(_outside_footprint(entries, footprint))
    for rule in rules:
        findings.extend(_rule_findings(rule, calls, tables_by_call))
    findings.sort(key=lambda f: (f.calls[0] if f.calls else -1, FINDING_KINDS.index(f.kind), f.table, f.key))
    return ProcessReport(findings, coverage, footprint is not None, tuple(r.id for r in rules))


def encode_value_log(entries: Iterable[WriteEntry]) -> list[list[Any]]:
    return [entry.to_list() for entry in entries]


def decode_value_log(data: Any) -> list[WriteEntry] | None:
    if not isinstance(data, list):
        return None
    return [WriteEntry.from_list(item) for item in data]


def suspect_rules(golden_reports: Mapping[str, ProcessReport]) -> dict[str, list[tuple[str, Finding]]]:
    """Rules a golden run breaks, with the (task id, finding) evidence: such a rule is *suspect*
    (the rule, or the golden trajectory, is wrong), listed like a suspect task."""
    found: dict[str, list[tuple[str, Finding]]] = defaultdict(list)
    for task_id, report in sorted(golden_reports.items()):
        for finding in report.findings:
            if finding.kind == "write_before_required_step":
                found[finding.rule].append((task_id, finding))
    return dict(found)
