"""Lists taken in slices: IN (...) lists and bulk writes that must stay small."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

IN_LIST_SIZE = 2000  # values per IN (...) list: far below SQLite's variable limit


class Sliceable(Protocol[T_co]):
    """What in_slices needs: a length and slices (a list, a tuple, or a sequence-like index)."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice, /) -> Sequence[T_co]: ...


def in_slices(values: Sliceable[T], size: int = IN_LIST_SIZE) -> Iterator[Sequence[T]]:
    """``values`` in consecutive slices of at most ``size`` (the last one shorter)."""
    for start in range(0, len(values), size):
        yield values[start : start + size]
