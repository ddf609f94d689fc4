"""Text as the database can store it: PostgreSQL rejects NUL characters in text and jsonb.

An LLM reply, a tool result or an imported file may hold U+0000. Stored as is, the row fails to
save (``DataError``), so the attempt would never be recorded. ``without_nul`` replaces each NUL
with U+2400 SYMBOL FOR NULL (``␀``), which pages show as such, everywhere in a JSON-like value.
"""

from __future__ import annotations

import json
from typing import Any

NUL = "\x00"
NUL_SHOWN = "\u2400"  # ␀


def without_nul(value: Any) -> Any:
    """`value` (str, or dicts/lists of them) with every NUL, in keys and values, shown as ␀."""
    if isinstance(value, str):
        return value.replace(NUL, NUL_SHOWN) if NUL in value else value
    if isinstance(value, dict | list | tuple):
        try:
            if "\\u0000" not in json.dumps(value, default=str):
                return value  # the common case: one C-speed pass, no copy
        except (TypeError, ValueError):
            pass
        return _replace(value)
    return value


def _replace(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(NUL, NUL_SHOWN)
    if isinstance(value, dict):
        return {_replace(key): _replace(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_replace(item) for item in value]
    return value
