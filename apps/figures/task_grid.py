"""The tasks x campaigns grid of c/N and its filters (one implementation: the tasks page and its export)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from apps.campaigns.models import Campaign
from apps.figures.results import TaskCell, TaskGridRow

TASK_FILTERS = {
    "": "All tasks",
    "unreliable": "Solved at least once, not reliably",
    "never": "Never solved",
    "flaky": "Flaky between campaigns",
}


def task_matches(cells: Sequence[TaskCell | None], kind: str) -> bool:
    """Whether a grid row belongs to a TASK_FILTERS kind ("" matches every row)."""
    if not kind:
        return True
    present = [cell for cell in cells if cell is not None]
    if kind == "unreliable":
        return any(cell.c >= 1 for cell in present) and not any(cell.dependable for cell in present)
    if kind == "never":
        return all(cell.c == 0 for cell in present)
    if kind == "flaky":
        # Dependable in one campaign but not in another that ran the same task.
        return any(cell.dependable for cell in present) and not all(cell.dependable for cell in present)
    return True


def task_grid_rows(campaigns: list[Campaign], frames: list[pd.DataFrame], *, kind: str) -> list[TaskGridRow]:
    """Rows by task id of the per-task tables (one per campaign, same order), those matching `kind`."""
    grid: dict[str, tuple[int, str, list[TaskCell | None]]] = {}
    for position, (campaign, frame) in enumerate(zip(campaigns, frames)):
        for task_pk, task_id, domain, n, c in zip(
            frame["task_pk"], frame["task_id"], frame["domain"], frame["n"], frame["c"]
        ):
            _, _, cells = grid.setdefault(task_id, (int(task_pk), domain, [None] * len(campaigns)))
            cells[position] = TaskCell(int(c), int(n), campaign.n_attempts)
    rows = []
    for task_id in sorted(grid):
        task_pk, domain, cells = grid[task_id]
        if task_matches(cells, kind):
            rows.append(TaskGridRow(task_pk=task_pk, task_id=task_id, domain=domain, cells=tuple(cells)))
    return rows
