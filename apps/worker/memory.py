"""A worker's memory budget: past it, the worker takes no new attempt until attempts in flight finish.

Memory is the proportional set size (PSS, /proc/<pid>/smaps_rollup) summed over the worker's process
tree — the worker, its fork servers and the server process of every attempt in flight — so the
pages forked servers share copy-on-write count once, as they cost the machine. Read at most every
``every_s`` seconds (reading a few hundred processes' rollups costs tens of milliseconds).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(child) for child in handle.read().split())
    except OSError:  # the process ended meanwhile, or there is no /proc
        pass
    return found


def process_tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo.extend(_children(current))
    return pids


def pss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def tree_pss_mb(pid: int | None = None) -> float:
    """PSS in MB of ``pid`` (default: this process) and all its descendants."""
    return sum(pss_mb(member) for member in process_tree(os.getpid() if pid is None else pid))


class MemoryBudget:
    """``over()``: whether the process tree uses more than ``limit_mb`` (0: no budget)."""

    def __init__(self, limit_mb: int, *, every_s: float = 5.0, measure: Callable[[], float] = tree_pss_mb):
        self.limit_mb = limit_mb
        self.every_s = every_s
        self._measure = measure
        self._lock = threading.Lock()
        self._measured_at = float("-inf")
        self.used_mb = 0.0

    def over(self) -> bool:
        if self.limit_mb <= 0:
            return False
        if time.monotonic() - self._measured_at >= self.every_s and self._lock.acquire(blocking=False):
            try:
                self.used_mb = self._measure()
                self._measured_at = time.monotonic()
            finally:
                self._lock.release()
        return self.used_mb > self.limit_mb
