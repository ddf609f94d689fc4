"""Lists taken in slices: IN (...) lists and bulk writes that must stay small."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

IN_LIST_SIZE = 2000  # values per IN (...) list: far below SQLite's variable limit


def in_slices(values: Sequence[T], size: int = IN_LIST_SIZE) -> Iterator[Sequence[T]]:
    """``values`` in consecutive slices of at most ``size`` (the last one shorter)."""
    for start in range(0, len(values), size):
        yield values[start : start + size]
