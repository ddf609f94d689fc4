"""Spreadsheet formula injection: text that a spreadsheet would run as a formula, made inert.

A cell whose text begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by
Excel, LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)`` can leak data or lure a
click). Names, task ids and labels come from imported files, so every text cell an export writes
goes through here. CSV: such text gets a leading apostrophe (OWASP's advice; spreadsheets show it
as text, and a reader sees the original after the apostrophe). XLSX: the cell is stored as a
string, never a formula (openpyxl would store ``=…`` as one), so it shows the text unchanged.
Numbers are never touched: only text. Headers (``<campaign> · passes``) are cells like any other,
and sheet titles, which a spreadsheet shows in formulas' references, follow the same rule.
"""

from __future__ import annotations

import re

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_text(value):
    """`value` as a CSV cell may hold it: text starting like a formula gets a leading apostrophe."""
    if value.__class__ is str and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


# Characters Excel refuses in a sheet title (openpyxl raises on them); 31 characters at most.
SHEET_TITLE_FORBIDDEN = re.compile(r"[\\*?:/\[\]]")
SHEET_TITLE_MAX = 31


def sheet_title(value: str) -> str:
    """`value` as a sheet title: forbidden characters dropped, never starting like a formula, 31 at most."""
    title = SHEET_TITLE_FORBIDDEN.sub(" ", value).strip().lstrip("'")
    if title.startswith(FORMULA_STARTS):
        title = "_" + title
    return title[:SHEET_TITLE_MAX] or "Sheet"
