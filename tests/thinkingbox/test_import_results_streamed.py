"""A big tb infer file is streamed: memory does not grow with its rows, and a bad last row writes nothing."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from django.db import connection

import apps.attempts.services as attempt_services
from apps.attempts import bulk_insert
from apps.attempts.models import Attempt, AttemptSignature, TaskSummary
from apps.thinkingbox import results_rows
from apps.thinkingbox.services import tb_results_import
from tb_engine.thinkingbox import ThinkingBoxFormatError
from tests.thinkingbox.conftest import SHARED, table_counts

APPEND_R6 = SHARED / "tb_infer/append_r6.jsonl"
REPETITIONS = 50  # rows per test: the tests grow with the file, as in a real big run


def _rows(count: int) -> list[dict]:
    """``count`` real tb infer rows (the append_r6 ones, cycled) spread over count/50 tests."""
    sample = [json.loads(line) for line in APPEND_R6.read_text().splitlines() if line.strip()]
    rows = []
    for number in range(count):
        row = json.loads(json.dumps(sample[number % len(sample)]))
        row["uid"] = f"cloud_drive.py:test_append_{number // REPETITIONS}"
        row["metadata"]["repetition"] = number % REPETITIONS
        rows.append(row)
    return rows


def _write(path, rows) -> None:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))


def _import_peak_bytes(path, team, owner, name) -> int:
    """tracemalloc's peak over one import (Python allocations, what RSS grows by)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        baseline = tracemalloc.get_traced_memory()[0]
        tb_results_import(path=path, campaign_name=name, team=team, owner=owner)
        return tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()


@pytest.mark.django_db(transaction=True)
def test_import_tb_results_memory_does_not_grow_with_the_rows(alice, team_a, tmp_path, monkeypatch):
    # Small batches so that four times the rows means many more batches, not bigger ones.
    monkeypatch.setattr(attempt_services, "IMPORT_BATCH_ROWS", 250, raising=False)
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    _write(small, _rows(1000))
    _write(big, _rows(4000))
    _import_peak_bytes(small, team_a, alice, "warm-up")  # first-use caches (templates, SQL) out of the way

    small_peak = _import_peak_bytes(small, team_a, alice, "small")
    big_peak = _import_peak_bytes(big, team_a, alice, "big")

    assert Attempt.objects.filter(campaign__name="big").count() == 4000
    # Holding every row (the old import) made the big peak about four times the small one.
    assert big_peak < small_peak * 1.3, (small_peak, big_peak)


@pytest.mark.django_db(transaction=True)
def test_import_tb_results_bad_last_row_writes_nothing(alice, team_a, tmp_path, monkeypatch):
    monkeypatch.setattr(attempt_services, "IMPORT_BATCH_ROWS", 250, raising=False)
    rows = _rows(1000)
    # Its key is fine, so the first pass lets it through; the second finds it after 999 rows were stored.
    rows[-1] = {**rows[-1], "messages": "hello"}
    path = tmp_path / "rows.jsonl"
    _write(path, rows)
    before = table_counts()

    with pytest.raises(ThinkingBoxFormatError) as raised:
        tb_results_import(path=path, campaign_name="bad", team=team_a, owner=alice)

    assert str(raised.value) == (
        f"{path}:1000: test cloud_drive.py:test_append_19: field messages must be list, got str"
    )
    assert table_counts() == before
    assert (AttemptSignature.objects.count(), TaskSummary.objects.count()) == (0, 0)


@pytest.mark.django_db
def test_import_tb_results_stores_every_column_of_the_rows(alice, team_a, tmp_path):
    path = tmp_path / "rows.jsonl"
    _write(path, _rows(120))

    report = tb_results_import(path=path, campaign_name="cols", team=team_a, owner=alice)

    attempts = Attempt.objects.filter(campaign=report.campaign).order_by("task__task_id", "index")
    first = attempts.first()
    assert attempts.count() == 120
    assert sorted({a.index for a in attempts}) == list(range(REPETITIONS))
    assert (first.status, first.retries, first.worker, first.superseded_runs) == ("done", 0, "", [])
    assert first.finished_at == report.campaign.finished_at
    assert first.result["transcript"]["messages"][0]["role"] == "system"
    assert (
        sum(s.n_done + s.n_infra_error for s in TaskSummary.objects.filter(campaign=report.campaign)) == 120
    )
    assert (
        AttemptSignature.objects.filter(campaign=report.campaign).count()
        == Attempt.objects.filter(campaign=report.campaign, verdict="fail").count()
    )


def _stored(campaign) -> list[tuple]:
    return list(
        Attempt.objects.filter(campaign=campaign)
        .order_by("task__task_id", "index")
        .values_list("task__task_id", "index", "status", "verdict", "result", "input_tokens", "categories")
    )


@pytest.mark.django_db(transaction=True)
def test_import_tb_results_in_worker_processes_stores_what_one_process_stores(
    alice, team_a, tmp_path, monkeypatch
):
    monkeypatch.setattr(results_rows, "IMPORT_WORKERS", 2)
    path = tmp_path / "rows.jsonl"
    _write(path, _rows(1200))
    monkeypatch.setattr(results_rows, "PARALLEL_FROM_ROWS", 10**9)
    alone = tb_results_import(path=path, campaign_name="one process", team=team_a, owner=alice)

    monkeypatch.setattr(results_rows, "PARALLEL_FROM_ROWS", 100)
    pooled = tb_results_import(path=path, campaign_name="worker processes", team=team_a, owner=alice)

    assert len(_stored(pooled.campaign)) == 1200
    assert _stored(pooled.campaign) == _stored(alone.campaign)
    assert (pooled.tb_agg, pooled.ours, pooled.disagreements) == (
        alone.tb_agg,
        alone.ours,
        alone.disagreements,
    )


@pytest.mark.django_db(transaction=True)
def test_import_tb_results_in_worker_processes_bad_row_writes_nothing(alice, team_a, tmp_path, monkeypatch):
    monkeypatch.setattr(results_rows, "IMPORT_WORKERS", 2)
    monkeypatch.setattr(results_rows, "PARALLEL_FROM_ROWS", 100)
    rows = _rows(1200)
    rows[900] = {**rows[900], "messages": "hello"}  # in a later chunk than the first ones stored
    rows[1100] = {**rows[1100], "messages": "hello"}
    path = tmp_path / "rows.jsonl"
    _write(path, rows)
    before = table_counts()

    with pytest.raises(ThinkingBoxFormatError) as raised:
        tb_results_import(path=path, campaign_name="bad", team=team_a, owner=alice)

    assert (
        str(raised.value)
        == f"{path}:901: test cloud_drive.py:test_append_18: field messages must be list, got str"
    )
    assert table_counts() == before


@pytest.mark.django_db
def test_import_tb_results_shows_nul_characters_as_the_record_path_does(alice, team_a, tmp_path):
    rows = _rows(2)
    rows[1]["messages"][-1]["content"] = "Done.\u0000"
    path = tmp_path / "rows.jsonl"
    _write(path, rows)

    report = tb_results_import(path=path, campaign_name="nul", team=team_a, owner=alice)

    stored = Attempt.objects.get(campaign=report.campaign, index=1).result["transcript"]["messages"]
    assert [m["content"] for m in stored if m["role"] == "assistant"][-1] == "Done.␀"


def _cache_size() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA cache_size")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_import_tb_results_enlarges_the_sqlite_page_cache_only_while_it_imports(
    alice, team_a, tmp_path, monkeypatch
):
    if connection.vendor != "sqlite":
        pytest.skip("the page cache is SQLite's")
    default = _cache_size()
    seen: list[int] = []
    real_store = attempt_services.signatures_store

    def store_and_look(*args, **kwargs):
        seen.append(_cache_size())
        return real_store(*args, **kwargs)

    monkeypatch.setattr(attempt_services, "signatures_store", store_and_look)
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    _write(good, _rows(100))
    rows = _rows(100)
    rows[-1] = {**rows[-1], "messages": "hello"}
    _write(bad, rows)

    tb_results_import(path=good, campaign_name="good", team=team_a, owner=alice)
    after_good = _cache_size()
    with pytest.raises(ThinkingBoxFormatError):
        tb_results_import(path=bad, campaign_name="bad", team=team_a, owner=alice)

    assert set(seen) == {-bulk_insert.SQLITE_IMPORT_CACHE_KIB}
    assert (after_good, _cache_size()) == (default, default)
