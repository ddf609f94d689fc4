"""Endpoint load without Redis: percentiles of the latency histogram, and no gate, no figures
when the broker is the embedded one."""

from __future__ import annotations

from apps.core.endpoint_load import (
    LATENCY_BOUNDS_MS,
    endpoint_load_redis,
    endpoint_loads,
    histogram_percentile,
    latency_bucket,
)
from apps.worker.endpoint_gate import install_endpoint_gate
from tb_engine.llm import endpoint_gate, set_endpoint_gate


def test_latency_bucket_is_the_first_bound_at_or_above():
    assert [latency_bucket(ms) for ms in (0, 100, 101, 999, 60_000, 60_001)] == [0, 0, 1, 3, 9, 10]


def test_histogram_percentile_interpolates_inside_the_bucket():
    counts = [0] * (len(LATENCY_BOUNDS_MS) + 1)
    counts[1], counts[3] = 5, 5  # five calls in 100–250 ms, five in 500–1000 ms
    assert histogram_percentile(counts, 0.5) == 250.0
    assert histogram_percentile(counts, 0.9) == 900.0
    assert histogram_percentile(counts, 0.1) == 130.0


def test_histogram_percentile_of_nothing_is_none_and_of_the_open_bucket_its_floor():
    empty = [0] * (len(LATENCY_BOUNDS_MS) + 1)
    slowest = [*empty[:-1], 4]
    assert histogram_percentile(empty, 0.5) is None
    assert histogram_percentile(slowest, 0.95) == 60_000.0


def test_embedded_broker_has_no_gate_and_no_figures(settings):
    settings.CELERY_BROKER_URL = "filesystem://"
    set_endpoint_gate(None)
    assert install_endpoint_gate() is None
    assert endpoint_gate() is None
    assert endpoint_load_redis() is None
    assert endpoint_loads(["http://127.0.0.1:8000/v1"]) is None
