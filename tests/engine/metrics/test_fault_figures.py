"""Robustness figures under a fault plan (tb_engine.metrics.faults): per kind, apart, paired Δ."""

from __future__ import annotations

import pytest

from tb_engine.metrics.faults import FaultedAttempt, fault_figures, paired_delta


def _record(*fired, duplicates=(), unfired=()):
    return {
        "fired": list(fired),
        "unfired": list(unfired),
        "none_fired": not fired,
        "duplicate_effects": list(duplicates),
    }


AFTER = {"kind": "error_after_commit", "committed": True, "call": 1}
BEFORE = {"kind": "error_before_commit", "committed": False, "call": 0}


def test_per_kind_recovery_duplicates_and_unfired_counted_apart():
    attempts = [
        FaultedAttempt("t1", "pass", _record(AFTER)),
        FaultedAttempt("t1", "fail", _record(AFTER, duplicates=[{"kind": "error_after_commit", "call": 1}])),
        FaultedAttempt("t2", "pass", _record(BEFORE)),
        FaultedAttempt("t2", "pass", _record(unfired=[{"ordinal": 3, "reason": "…"}])),
        FaultedAttempt("t3", "infra_error", _record(AFTER)),  # not graded: counts nowhere
    ]

    figures = fault_figures(attempts)

    assert (figures["graded"], figures["tasks"], figures["none_fired"], figures["unfired_ordinals"]) == (
        4,
        2,
        1,
        1,
    )
    after = figures["kinds"]["error_after_commit"]
    assert (
        after["fired"],
        after["recovered"]["count"],
        after["recovered"]["of"],
        after["duplicate_effects"],
    ) == (2, 1, 2, 1)
    assert figures["kinds"]["error_before_commit"]["recovered"]["rate"] == 1.0
    assert figures["kinds"]["slow_reply"]["fired"] == 0
    assert (figures["duplicate_effect"]["count"], figures["duplicate_effect"]["of"]) == (1, 2)
    assert figures["pass_at_1"] == pytest.approx((0.5 + 1.0) / 2)
    assert figures["all_n"] == 0.5


def test_paired_delta_is_faulted_minus_clean_on_shared_tasks_with_a_floor():
    clean = {f"t{i}": (4, 4) for i in range(10)}
    faulted = {f"t{i}": (4, 0 if i < 6 else 4) for i in range(10)} | {"only-faulted": (4, 0)}

    delta = paired_delta(faulted, clean, n_attempts=4)

    assert delta["tasks"] == 10
    assert (delta["pass_at_1"]["faulted"], delta["pass_at_1"]["clean"]) == (pytest.approx(0.4), 1.0)
    assert delta["pass_at_1"]["delta"] == pytest.approx(-0.6)
    assert delta["all_n"]["delta"] == pytest.approx(-0.6)
    assert delta["all_n"]["mdd"] is not None and 0 < delta["all_n"]["mdd"] < 0.6
    assert delta["all_n"]["clears"] is True


def test_paired_delta_of_equal_campaigns_does_not_clear_and_of_nothing_is_unknown():
    same = {f"t{i}": (3, i % 4) for i in range(8)}
    equal = paired_delta(same, same, n_attempts=3)
    assert (equal["pass_at_1"]["delta"], equal["pass_at_1"]["clears"]) == (0.0, False)

    nothing = paired_delta({"a": (3, 3)}, {"b": (3, 3)}, n_attempts=3)
    assert nothing == {
        "tasks": 0,
        "pass_at_1": {"faulted": None, "clean": None, "delta": None, "mdd": None, "clears": None},
        "all_n": {"faulted": None, "clean": None, "delta": None, "mdd": None, "clears": None},
    }
