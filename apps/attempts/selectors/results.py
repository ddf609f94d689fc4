"""Stored results read back as the engine's typed ``AttemptResult``: the one way to read ``Attempt.result``.

The JSON shape belongs to the engine (``tb_engine.results``: ``format_version``, ``from_dict``);
this module is where the Django side turns a stored row into that object, so no other app reads
the JSON by key. A result written in a format this code does not know raises
``ResultFormatError`` naming the attempt, the field and the version — it is never guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apps.attempts.models import Attempt
from tb_engine.result_format import ResultFormatError
from tb_engine.results import AttemptResult


class StoredResultError(ResultFormatError):
    """A stored result that cannot be read, with the attempt it belongs to in the message."""

    def __init__(self, error: ResultFormatError, *, attempt_id: int) -> None:
        self.attempt_id = attempt_id
        super().__init__(error.problem, path=error.path, version=error.version)

    @property
    def message(self) -> str:
        return f"attempt {self.attempt_id}: {super().message}"


def stored_result(stored: Mapping[str, Any], *, attempt_id: int | None = None) -> AttemptResult | None:
    """The typed result of a stored result dict; None for an attempt that has none yet (``{}``)."""
    if not stored:
        return None
    try:
        return AttemptResult.from_dict(stored)
    except ResultFormatError as error:
        if attempt_id is None:
            raise
        raise StoredResultError(error, attempt_id=attempt_id) from error


def attempt_result(attempt: Attempt) -> AttemptResult | None:
    """The typed result of one attempt row (None while it has none: queued, running, cancelled)."""
    return stored_result(attempt.result, attempt_id=attempt.pk)
