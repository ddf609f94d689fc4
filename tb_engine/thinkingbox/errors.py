"""The one error type every ThinkingBox importer raises, and the non-fatal problem record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class ThinkingBoxFormatError(ValueError):
    """Input in ThinkingBox format could not be used; names the file, line and test where known."""

    def __init__(self, message: str, *, file: str | Path = "", line: int | None = None, test: str = ""):
        self.message = message
        self.file = str(file)
        self.line = line
        self.test = test
        super().__init__(self._render())

    def _render(self) -> str:
        place = self.file
        if self.line is not None:
            place += f":{self.line}"
        if self.test:
            place += f": test {self.test}"
        return f"{place}: {self.message}" if place else self.message


@dataclass(frozen=True)
class ImportProblem:
    """Something worth showing the importer that does not stop the import (e.g. a listed task not found)."""

    file: str
    message: str
    test: str = ""
    line: int | None = None

    def __str__(self) -> str:
        place = self.file + (f":{self.line}" if self.line is not None else "")
        return f"{place}: {'test ' + self.test + ': ' if self.test else ''}{self.message}"
