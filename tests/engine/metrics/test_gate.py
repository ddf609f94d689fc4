"""Release-gate rules: thresholds on point estimates, drops that must clear the noise floor."""

from __future__ import annotations

import pytest

from tb_engine.metrics.gate import GateInputError, evaluate

FIGURES = {
    "pass_at_1": {"value": 0.62, "lo": 0.55, "hi": 0.70},
    "all_n": {"value": 0.30, "lo": 0.22, "hi": 0.38},
}


def comparison(delta_pass1: float, mdd_pass1: float, delta_all_n: float = 0.0, mdd_all_n: float = 0.05):
    return {
        "delta_pass_at_1": {
            "value": delta_pass1,
            "lo": delta_pass1 - 0.02,
            "hi": delta_pass1 + 0.02,
            "mdd": mdd_pass1,
        },
        "delta_all_n": {
            "value": delta_all_n,
            "lo": delta_all_n - 0.02,
            "hi": delta_all_n + 0.02,
            "mdd": mdd_all_n,
        },
    }


def test_min_rules_compare_the_point_estimate_with_the_threshold():
    rules = evaluate(FIGURES, None, min_pass1=0.6, min_all_n=0.35)
    assert [(r.rule, r.verdict) for r in rules] == [("min-pass1", "pass"), ("min-all-n", "fail")]
    assert (rules[0].value, rules[0].lo, rules[0].hi, rules[0].threshold) == (0.62, 0.55, 0.70, 0.6)
    assert rules[1].detail == "30.0% is below 35.0%"


def test_drop_beyond_the_allowance_that_clears_the_floor_fails():
    rules = evaluate(FIGURES, comparison(-0.08, 0.05), max_drop_pp=2.0)
    pass1 = rules[0]
    assert (pass1.rule, pass1.verdict) == ("max-drop-pp pass@1", "fail")
    assert pass1.value == pytest.approx(8.0)
    assert pass1.mdd == pytest.approx(5.0)
    assert (pass1.lo, pass1.hi) == (pytest.approx(6.0), pytest.approx(10.0))
    assert rules[1].verdict == "pass"  # all-N did not move


def test_drop_beyond_the_allowance_below_the_floor_is_not_significant_and_passes():
    pass1 = evaluate(FIGURES, comparison(-0.04, 0.05), max_drop_pp=2.0)[0]
    assert pass1.verdict == "pass"
    assert (
        pass1.detail == "drop +4.0 pp exceeds 2.0 pp but is below the noise floor (5.0 pp): not significant"
    )


def test_drop_within_the_allowance_passes_even_when_significant():
    assert evaluate(FIGURES, comparison(-0.08, 0.05), max_drop_pp=10.0)[0].verdict == "pass"


def test_bad_inputs_are_refused_with_the_rule_named():
    with pytest.raises(GateInputError, match="min-pass1: give a share"):
        evaluate(FIGURES, None, min_pass1=60)
    with pytest.raises(GateInputError, match="needs a baseline"):
        evaluate(FIGURES, None, max_drop_pp=1)
    with pytest.raises(GateInputError, match="no rule chosen"):
        evaluate(FIGURES, None)
