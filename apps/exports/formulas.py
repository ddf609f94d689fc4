"""Spreadsheet formula injection: text that a spreadsheet would run as a formula, made inert.

A cell whose text begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by
Excel, LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)`` can leak data or lure a
click). Names, task ids and labels come from imported files, so every text cell an export writes
goes through here. CSV: such text gets a leading apostrophe (OWASP's advice; spreadsheets show it
as text, and a reader sees the original after the apostrophe). XLSX: the cell is stored as a
string, never a formula (openpyxl would store ``=…`` as one), so it shows the text unchanged.
Numbers are never touched: only text.
"""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_text(value):
    """`value` as a CSV cell may hold it: text starting like a formula gets a leading apostrophe."""
    if value.__class__ is str and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
