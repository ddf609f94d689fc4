"""Tables to CSV and XLSX. XLSX keeps numbers as numbers with percent/money formats, a frozen bold header and fitted widths."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from decimal import Decimal

from openpyxl import Workbook
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from apps.exports.formulas import csv_text, sheet_title
from apps.exports.tables import Column, Table

NUMBER_FORMATS = {
    "int": "#,##0",
    "float": "#,##0.00",
    "share": "0.0%",
    "points": '+0.0" pp";-0.0" pp";0.0" pp"',
    "money": '"$"#,##0.0000',
}
MAX_WIDTH = 60


def _plain(value):
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value)
    return value


def table_csv(table: Table, *, about: Sequence[tuple[str, str]] = ()) -> str:
    """CSV text: the About block as `# key: value` comment lines, a header of column titles, then raw
    values (shares as 0..1, empty for undefined). Readers skip the block with comment="#"."""
    buffer = io.StringIO()
    for key, value in about:
        buffer.write(f"# {key.strip()}: {_about_csv_value(value)}\n")
    writer = csv.writer(buffer)
    writer.writerow([csv_text(column.title) for column in table.columns])  # titles hold names
    for row in table.values():
        writer.writerow(["" if value is None else csv_text(_plain(value)) for value in row])
    return buffer.getvalue()


def _about_csv_value(value) -> str:
    """An About value on one comment line. A CSV reader that ignores the `#` still splits the line at
    commas, so every piece after a comma is made inert like a cell (names come from imported files)."""
    text = " ".join(str(value).splitlines())
    first, *rest = text.split(",")
    return ",".join([first, *(csv_text(piece.lstrip()) for piece in rest)])


def _append_as_text(sheet: Worksheet, values: list) -> None:
    """Append a row; openpyxl reads text starting with '=' as a formula: every such cell stays text."""
    sheet.append(values)
    for cell in sheet[sheet.max_row]:
        if cell.data_type == "f":
            cell.data_type = "s"


def first_sheet(workbook: Workbook) -> Worksheet:
    """The worksheet a new Workbook starts with (openpyxl's types allow none, or a chart sheet)."""
    sheet = workbook.active
    if not isinstance(sheet, Worksheet):
        raise TypeError(f"expected the workbook's first sheet to be a worksheet, got {sheet!r}")
    return sheet


def write_sheet(sheet: Worksheet, columns: list[Column], rows: Sequence[Sequence]) -> None:
    """Header + rows into `sheet` with number formats by column kind, frozen header and widths."""
    _append_as_text(sheet, [column.title for column in columns])  # titles hold names
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    for row in rows:
        _append_as_text(sheet, [_plain(value) for value in row])
    for position, column in enumerate(columns, start=1):
        fmt = NUMBER_FORMATS.get(column.kind)
        letter = get_column_letter(position)
        if fmt:
            for (cell,) in sheet.iter_rows(min_row=2, min_col=position, max_col=position):
                cell.number_format = fmt
        longest = max([len(column.title)] + [len(_display(row[position - 1], column.kind)) for row in rows])
        sheet.column_dimensions[letter].width = min(MAX_WIDTH, longest + 2)
    sheet.freeze_panes = "A2"
    sheet.auto_filter.ref = f"A1:{get_column_letter(max(1, len(columns)))}{max(1, len(rows) + 1)}"


def append_caption(sheet: Worksheet, caption: Sequence[tuple[str, object]]) -> None:
    """Below a table, after an empty row: what it answers, one bold "item" and its value per row."""
    sheet.append([])
    for item, value in caption:
        _append_as_text(sheet, [item, _plain(value)])
        sheet.cell(row=sheet.max_row, column=1).font = Font(bold=True)


def write_about(workbook: Workbook, about: list[tuple[str, str]]) -> None:
    """An About sheet: what the workbook is, filters, time, user, suite hashes, price sheets, definitions."""
    sheet = workbook.create_sheet("About")
    sheet.append(["item", "value"])
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    for key, value in about:
        _append_as_text(sheet, [key, value])
    sheet.column_dimensions["A"].width = 34
    sheet.column_dimensions["B"].width = 100
    sheet.freeze_panes = "A2"


def _display(value, kind: str) -> str:
    if value is None:
        return ""
    if kind == "share":
        return "100.0%"
    if kind == "money":
        return f"${float(value):,.4f}"
    if kind in ("int", "float", "points") and isinstance(value, (int, float, Decimal)):
        return f"{float(value):,.2f} pp"
    return str(_plain(value))


def table_xlsx(table: Table, *, about: Sequence[tuple[str, str]] = ()) -> bytes:
    """The table's sheet (frozen header, autofilter), then an About sheet when `about` is given."""
    workbook = Workbook()
    sheet = first_sheet(workbook)
    sheet.title = sheet_title(table.title)
    write_sheet(sheet, table.columns, table.values())
    if about:
        write_about(workbook, list(about))
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()
