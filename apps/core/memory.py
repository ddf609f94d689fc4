"""Allocation bursts without the cyclic garbage collector's pauses."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run a block with Python's cyclic garbage collector paused (reference counting still frees memory).

    For code that allocates hundreds of thousands of short-lived, cycle-free objects at once (rows
    of a backfill, the cluster index): each collection the burst triggers walks every object of the
    process, ~0.13 s in a web process (bench/clusters.py), several times per burst. Cycles created
    meanwhile are collected after the block.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
