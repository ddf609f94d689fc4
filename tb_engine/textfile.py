"""Imported files read as text: UTF-8 without NUL, or an error naming the first bad line.

Every importer reads its files through ``read_text`` so a binary file, a file saved in another
encoding (latin-1) or one holding a NUL byte (never valid in YAML, JSON or Python source) is
one clear error (``NotText``: message and 1-based line) instead of a ``UnicodeDecodeError``.
Line endings are read as Python's text mode reads them (``\\r\\n`` and ``\\r`` become ``\\n``).
"""

from __future__ import annotations

from pathlib import Path


class NotText(ValueError):
    """The file is not UTF-8 text; ``line`` is the line of the first offending byte."""

    def __init__(self, message: str, line: int):
        self.message = message
        self.line = line
        super().__init__(f"line {line}: {message}")


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of `path`; `what` names the format in the NUL error ("YAML", "JSON", "Python")."""
    data = Path(path).read_bytes()
    nul = data.find(b"\x00")
    if nul >= 0:
        raise NotText(f"NUL character: not a {what} file", data.count(b"\n", 0, nul) + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotText(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be decoded (save the file as UTF-8)",
            data.count(b"\n", 0, exc.start) + 1,
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")
