"""EffectsStates -> engine Snapshots (S0, SR, SG) and the engine's classified diff."""

from __future__ import annotations

from typing import Any

from tb_engine.diff import Writes, diff_states
from tb_engine.results import DiffItem
from tb_engine.snapshot import Snapshot
from tb_engine.spec import TableSpec
from tb_engine.thinkingbox.effects import EffectsStates


def snapshot_of(rows: dict[str, list[dict[str, Any]]], specs: dict[str, TableSpec]) -> Snapshot:
    """One state as a Snapshot over exactly ``specs`` (tables missing from the state are empty)."""
    return Snapshot.from_rows({name: rows.get(name) or [] for name in specs}, specs)


def snapshots_of(states: EffectsStates, specs: dict[str, TableSpec] | None = None) -> dict[str, Snapshot]:
    """S0, SR and SG under one set of table specs, keyed initial / result / golden."""
    specs = specs or states.specs
    return {
        "initial": snapshot_of(states.initial, specs),
        "result": snapshot_of(states.result, specs),
        "golden": snapshot_of(states.golden, specs),
    }


def classified_diff(states: EffectsStates, writes: Writes | None = None) -> list[DiffItem]:
    """Every SR-vs-SG difference classified against S0 (SPEC §3), by row key rather than list position."""
    snaps = snapshots_of(states)
    return diff_states(snaps["initial"], snaps["result"], snaps["golden"], writes)
