"""The second pass of a ``tb infer`` import: every row parsed whole and made ready to store, in file order.

A big file's rows are parsed and converted by worker processes (forked, so they share the task
table read before), a few chunks ahead of the process that stores them; parsing and converting
is four fifths of an import's CPU and runs on every core. A small file, or a YAML result, is
converted here. Errors are the same either way: the first bad row in file order raises, naming
its line, after the rows before it were handed on.
"""

from __future__ import annotations

import collections
import gc
import itertools
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from apps.attempts.services import ImportRow, attempt_import_row
from tb_engine.thinkingbox import ThinkingBoxFormatError, iter_tb_lines, iter_tb_results, parse_tb_line
from tb_engine.thinkingbox.agg import TbTallied
from tb_engine.thinkingbox.results import TbRecord

# Below this many rows the pool's start (tens of ms per process) is not worth it.
PARALLEL_FROM_ROWS = 20_000
CHUNK_ROWS = 250  # rows per message to a worker process
# Worker processes for a big file (TB_IMPORT_WORKERS; 0: one per core, at most 4).
IMPORT_WORKERS = int(os.environ.get("TB_IMPORT_WORKERS", "0") or 0) or min(4, os.cpu_count() or 1)

Converted = tuple[ImportRow, TbTallied, int]  # the row to store, what the tally reads, disagreements
TaskKeys = dict[str, tuple[int, str]]  # test id -> (Task pk, content hash)

_job: dict[str, Any] = {}  # set before the pool forks: what its processes read


def _converted(record: TbRecord, tasks: TaskKeys) -> Converted:
    pk, content_hash = tasks[record.task_id]
    result = record.to_attempt_result(task_hash=content_hash)
    return (
        attempt_import_row(task_id=pk, index=record.repetition, result=result),
        TbTallied.of(record),
        sum(1 for c in record.effects.values() if not c.agree),
    )


def _convert_chunk(chunk: list[tuple[int, bytes]]) -> tuple[list[Converted], tuple | None]:
    """In a worker process: the chunk's rows converted, and the first error (sent as plain values)."""
    done: list[Converted] = []
    try:
        for number, data in chunk:
            done.append(_converted(parse_tb_line(data, file=_job["path"], line=number), _job["tasks"]))
    except ThinkingBoxFormatError as exc:
        return done, (exc.message, exc.file, exc.line, exc.test)
    return done, None


def converted_rows(path: Path, tasks: TaskKeys, *, rows: int) -> Iterator[Converted]:
    """Each row of the file converted, in file order; ``rows`` (from the first pass) picks the way."""
    if rows < PARALLEL_FROM_ROWS or IMPORT_WORKERS < 2 or path.suffix in (".yaml", ".yml"):
        for record in iter_tb_results(path):
            yield _converted(record, tasks)
        return
    _job.update(path=str(path), tasks=tasks)
    ahead = IMPORT_WORKERS * 4  # chunks in flight: enough to keep every process busy, memory flat
    # The forked workers share this process's pages until they write to them; the collector would
    # write to every object it scans (copying the whole heap into each worker), frozen it leaves them.
    gc.freeze()
    try:
        with multiprocessing.get_context("fork").Pool(IMPORT_WORKERS) as pool:
            chunks = iter_tb_lines(path, size=CHUNK_ROWS)
            pending = collections.deque(
                pool.apply_async(_convert_chunk, (chunk,)) for chunk in itertools.islice(chunks, ahead)
            )
            while pending:
                done, error = pending.popleft().get()
                following = next(chunks, None)
                if following is not None:
                    pending.append(pool.apply_async(_convert_chunk, (following,)))
                yield from done
                if error is not None:
                    message, file, line, test = error
                    raise ThinkingBoxFormatError(message, file=file, line=line, test=test)
    finally:
        gc.unfreeze()
        _job.clear()
