"""Small text helpers shared by the agent, user simulator and judge."""

from __future__ import annotations


def truncate_text(text: str, limit: int | None) -> str:
    """Cut ``text`` to ``limit`` characters, ending with a visible marker that says how much was dropped."""
    if limit is None or len(text) <= limit:
        return text
    dropped = len(text) - limit
    return f"{text[:limit]}\n…[truncated {dropped} characters]"


def strip_marker(text: str, marker: str | None) -> tuple[str, bool]:
    """Remove every occurrence of ``marker`` from ``text``; return the cleaned text and whether it was present."""
    if not marker or marker not in text:
        return text, False
    return text.replace(marker, "").strip(), True
