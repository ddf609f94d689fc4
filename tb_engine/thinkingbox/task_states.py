"""S0 and SG of a task on one server, built once per process and reused by that task's later attempts.

A ThinkingBox server's ``__reserved__geteffects`` answer carries three whole database states
(S0, SR, SG: 100-160 KB of JSON for the sandbox servers). S0 and SG depend only on the task and
the server: every attempt of a task gets the same two states back. Building their snapshots,
inferring the table specs from them, and building SR's unchanged tables again on every attempt
was most of the grading step's CPU in the training environment, where each task is attempted
thousands of times.

Reuse is exact, never assumed: an entry is used for an answer only when the answer's S0 and SG
serialise to exactly the JSON text they had when the entry was built (types included: ``1``,
``1.0`` and ``true`` differ as text), and under equal hash declarations. Snapshots, specs and
tables are pure functions of those inputs (``build_table``, ``infer_table_specs``), so a reused
one equals the one that would be built. SR's tables are reused the same way, one by one: a table
whose rows serialise exactly as in S0 (or SG) gets S0's (or SG's) built table.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tb_engine.snapshot import Snapshot, TableState, build_table
from tb_engine.spec import TableSpec
from tb_engine.thinkingbox.declarations import ServerDeclarations
from tb_engine.thinkingbox.effects import infer_table_specs, snapshot_of

CACHE_SIZE = 512  # tasks; an entry holds two snapshots of one task (~1 MB for a sandbox server)


def table_texts(state: dict[str, Any]) -> dict[str, str]:
    """Each table's rows as JSON text (``None`` rows as ``[]``, as the snapshots read them)."""
    return {name: json.dumps(rows or [], separators=(",", ":")) for name, rows in state.items()}


@dataclass(frozen=True)
class TaskStates:
    """One task's S0 and SG on one server: their per-table JSON texts, specs and built snapshots."""

    declarations: ServerDeclarations
    initial_texts: dict[str, str]
    golden_texts: dict[str, str]
    specs: dict[str, TableSpec]  # inferred from S0 and SG, as ``McpBackend.table_specs`` does
    initial: Snapshot
    golden: Snapshot

    def matches(
        self, declarations: ServerDeclarations, initial: dict[str, str], golden: dict[str, str]
    ) -> bool:
        return (
            declarations == self.declarations
            and initial == self.initial_texts
            and golden == self.golden_texts
        )

    def result_snapshot(self, rows: dict[str, list[dict[str, Any]]], texts: dict[str, str]) -> Snapshot:
        """SR over ``self.specs`` (a table missing from ``rows`` is empty), as ``snapshot_of`` builds
        it, with every table whose text equals S0's or SG's taken from those snapshots."""
        tables: dict[str, TableState] = {}
        for name, spec in self.specs.items():
            text = texts.get(name, "[]")
            if text == self.initial_texts.get(name, "[]"):
                tables[name] = self.initial.tables[name]
            elif text == self.golden_texts.get(name, "[]"):
                tables[name] = self.golden.tables[name]
            else:
                tables[name] = build_table(spec, rows.get(name) or [], source="snapshot")
        return Snapshot(tables)


def build_task_states(
    server: str,
    declarations: ServerDeclarations,
    initial: dict[str, Any],
    golden: dict[str, Any],
    initial_texts: dict[str, str],
    golden_texts: dict[str, str],
) -> TaskStates:
    """The entry for one answer's S0 and SG (specs from both, snapshots over those specs)."""
    initial_rows = {name: list(rows or []) for name, rows in initial.items()}
    golden_rows = {name: list(rows or []) for name, rows in golden.items()}
    specs = infer_table_specs(server, [initial_rows, golden_rows], declarations)
    return TaskStates(
        declarations=declarations,
        initial_texts=initial_texts,
        golden_texts=golden_texts,
        specs=specs,
        initial=snapshot_of(initial_rows, specs),
        golden=snapshot_of(golden_rows, specs),
    )


_cache: OrderedDict[tuple[str, ...], TaskStates] = OrderedDict()
_lock = threading.Lock()


def cached(key: tuple[str, ...]) -> TaskStates | None:
    with _lock:
        entry = _cache.get(key)
        if entry is not None:
            _cache.move_to_end(key)
        return entry


def store(key: tuple[str, ...], entry: TaskStates) -> None:
    with _lock:
        _cache[key] = entry
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def clear() -> None:
    """Forget every entry (tests)."""
    with _lock:
        _cache.clear()
