"""Release-gate rules over a campaign's figures and its paired comparison with a baseline.

Rules (each optional; the gate passes when every chosen rule holds):

* ``min_pass1`` / ``min_all_n`` (shares 0..1): the campaign's point estimate must reach the
  threshold. The 95% task-bootstrap interval is reported beside it but does not decide.
* ``max_drop_pp`` (percentage points, needs a baseline): for pass@1 and for the all-N share, the
  drop from the baseline (baseline minus campaign, paired on their shared tasks) fails the gate only
  when it exceeds the allowed drop *and* clears the noise floor — the MDD of SPEC §9 from the
  paired task bootstrap. A larger drop that stays under the floor is reported as not significant
  and passes.

``evaluate`` takes the engine's dicts (``campaign_metrics`` and ``paired_comparison``) and returns
plain ``RuleResult`` rows; printing and JUnit are the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tb_engine.metrics.noise import clears

PASS, FAIL = "pass", "fail"


@dataclass(frozen=True)
class RuleResult:
    """One gate rule: what it measures, the figure and threshold, its interval, and the verdict."""

    rule: str  # e.g. "min-pass1", "max-drop-pp pass@1"
    metric: str  # pass_at_1 | all_n
    value: float | None  # share (min rules) or drop in points (drop rules)
    threshold: float
    lo: float | None  # 95% interval of the value, same unit
    hi: float | None
    mdd: float | None  # noise floor in points (drop rules only)
    uses: str  # what decides the verdict, in words
    verdict: str  # pass | fail
    detail: str  # why, in words

    @property
    def passed(self) -> bool:
        return self.verdict == PASS


class GateInputError(ValueError):
    """A rule that cannot be evaluated as asked (bad threshold, drop rule without a baseline)."""


def _share_threshold(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise GateInputError(f"{name}: give a share between 0 and 1 (e.g. 0.6 for 60%), got {value!r}")
    return float(value)


def _min_rule(rule: str, metric: str, estimate: Mapping[str, Any], threshold: float) -> RuleResult:
    value = estimate.get("value")
    if value is None:
        verdict, detail = FAIL, "no estimate: no task has a done attempt"
    elif value >= threshold:
        verdict, detail = PASS, f"{value * 100:.1f}% reaches {threshold * 100:.1f}%"
    else:
        verdict, detail = FAIL, f"{value * 100:.1f}% is below {threshold * 100:.1f}%"
    return RuleResult(
        rule=rule,
        metric=metric,
        value=value,
        threshold=threshold,
        lo=estimate.get("lo"),
        hi=estimate.get("hi"),
        mdd=None,
        uses="point estimate >= threshold (interval shown, not used)",
        verdict=verdict,
        detail=detail,
    )


def _points(value: float | None) -> float | None:
    return None if value is None else value * 100.0


def _drop_rule(rule: str, metric: str, delta: Mapping[str, Any], allowed_pp: float) -> RuleResult:
    # delta is campaign minus baseline (shares); a drop is its negative, in points.
    value = delta.get("value")
    drop = None if value is None else -value * 100.0
    lo, hi = _points(delta.get("hi")), _points(delta.get("lo"))
    lo, hi = (None if lo is None else -lo), (None if hi is None else -hi)
    floor = _points(delta.get("mdd"))
    significant = clears(value, delta.get("mdd"))
    if drop is None:
        verdict, detail = FAIL, "no shared task with a done attempt in both campaigns"
    elif drop <= allowed_pp:
        verdict, detail = PASS, f"drop {drop:+.1f} pp is within the allowed {allowed_pp:.1f} pp"
    elif significant:
        verdict, detail = FAIL, f"drop {drop:+.1f} pp exceeds {allowed_pp:.1f} pp and clears the noise floor"
    elif floor is None:
        verdict, detail = (
            FAIL,
            f"drop {drop:+.1f} pp exceeds {allowed_pp:.1f} pp (no noise floor: too few tasks)",
        )
    else:
        verdict = PASS
        detail = f"drop {drop:+.1f} pp exceeds {allowed_pp:.1f} pp but is below the noise floor ({floor:.1f} pp): not significant"
    return RuleResult(
        rule=rule,
        metric=metric,
        value=drop,
        threshold=allowed_pp,
        lo=lo,
        hi=hi,
        mdd=floor,
        uses="drop > allowed and drop >= MDD (paired task bootstrap, 1.96 + 0.84 SE)",
        verdict=verdict,
        detail=detail,
    )


def evaluate(
    figures: Mapping[str, Any],
    comparison: Mapping[str, Any] | None,
    *,
    min_pass1: float | None = None,
    min_all_n: float | None = None,
    max_drop_pp: float | None = None,
) -> list[RuleResult]:
    """The gate's rule rows in a fixed order (min-pass1, min-all-n, then the two drop rules)."""
    rules: list[RuleResult] = []
    if min_pass1 is not None:
        threshold = _share_threshold("min-pass1", min_pass1)
        rules.append(_min_rule("min-pass1", "pass_at_1", figures["pass_at_1"], threshold))
    if min_all_n is not None:
        threshold = _share_threshold("min-all-n", min_all_n)
        rules.append(_min_rule("min-all-n", "all_n", figures["all_n"], threshold))
    if max_drop_pp is not None:
        if comparison is None:
            raise GateInputError("max-drop-pp: needs a baseline campaign to measure the drop from")
        if max_drop_pp < 0:
            raise GateInputError(f"max-drop-pp: must be >= 0 points, got {max_drop_pp!r}")
        rules.append(
            _drop_rule("max-drop-pp pass@1", "pass_at_1", comparison["delta_pass_at_1"], max_drop_pp)
        )
        rules.append(_drop_rule("max-drop-pp all-N", "all_n", comparison["delta_all_n"], max_drop_pp))
    if not rules:
        raise GateInputError("no rule chosen: give --min-pass1, --min-all-n and/or --max-drop-pp")
    return rules
