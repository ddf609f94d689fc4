"""Paired comparison, reversals, Spearman, learning zone, and tb agg compatibility."""

import json
import re
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from tb_engine.metrics import (
    MetricsInputError,
    learning_zone,
    paired_comparison,
    pass_at_k,
    pass_hat_k_plugin,
    prob_a_beats_b,
    reversals,
    spearman,
)
from tests.support.paths import THINKINGBOX_DIR

TB_INFER = THINKINGBOX_DIR / "tb_infer"


def frame(rows):
    return pd.DataFrame(rows, columns=["task_id", "n", "c"])


def test_paired_comparison_on_synthetic_tasks_hand_computed():
    a = frame([("t1", 4, 4), ("t2", 4, 1), ("t3", 4, 4), ("t4", 4, 0)])
    b = frame([("t1", 4, 2), ("t2", 4, 4), ("t3", 4, 4), ("t4", 4, 0)])
    result = paired_comparison(a, b, n_attempts=4)
    assert result["delta_pass_at_1"]["value"] == pytest.approx((0.5 - 0.75 + 0 + 0) / 4)
    assert result["delta_all_n"]["value"] == 0.0
    assert result["gained"] == ["t1"]
    assert result["lost"] == ["t2"]
    assert result["sharpening"] is False
    assert [row["delta_pass_at_1"] for row in result["per_task"]] == [0.5, -0.75, 0.0, 0.0]
    assert result["per_task"][0]["p_a_better"] == pytest.approx(prob_a_beats_b(4, 4, 4, 2))
    assert result["per_task"][2]["p_a_better"] == pytest.approx(0.5)
    assert (
        result["delta_pass_at_1"]["lo"]
        <= result["delta_pass_at_1"]["value"]
        <= result["delta_pass_at_1"]["hi"]
    )


def test_paired_comparison_identical_campaigns_have_zero_width_delta_intervals():
    a = frame([(f"t{i}", 10, i) for i in range(11)])
    result = paired_comparison(a, a.copy(), n_attempts=10)
    assert (result["delta_pass_at_1"]["lo"], result["delta_pass_at_1"]["hi"]) == (0.0, 0.0)
    assert (result["delta_all_n"]["lo"], result["delta_all_n"]["hi"]) == (0.0, 0.0)


def test_paired_comparison_paired_interval_narrower_than_unpaired_spread():
    # B is A minus one pass on every task: per-task deltas are constant, so pairing removes task variance.
    a = frame([(f"t{i}", 10, 1 + i % 10) for i in range(40)])
    b = frame([(f"t{i}", 10, i % 10) for i in range(40)])
    result = paired_comparison(a, b, n_attempts=10)
    assert result["delta_pass_at_1"]["value"] == pytest.approx(0.1)
    assert result["delta_pass_at_1"]["hi"] - result["delta_pass_at_1"]["lo"] == pytest.approx(0.0, abs=1e-12)


def test_paired_comparison_flags_sharpening():
    a = frame([("t1", 4, 4), ("t2", 4, 0)])
    b = frame([("t1", 4, 1), ("t2", 4, 1)])
    result = paired_comparison(a, b, n_attempts=4)
    assert result["pass_at_1"] == {"a": 0.5, "b": 0.25}
    assert result["pass_at_n_observed"] == {"a": 0.5, "b": 1.0}
    assert result["sharpening"] is True


def test_paired_comparison_reports_unshared_tasks():
    a = frame([("t1", 2, 2), ("t2", 2, 2)])
    b = frame([("t1", 2, 0), ("t3", 2, 2)])
    result = paired_comparison(a, b, n_attempts=2)
    assert (result["tasks"], result["only_in_a"], result["only_in_b"]) == (1, ["t2"], ["t3"])


def test_reversals_lists_pairs_ordered_oppositely():
    campaigns = {"steady": (0.5, 0.4), "explorer": (0.9, 0.05), "mid": (0.6, 0.3), "tie": (0.5, 0.4)}
    assert reversals(campaigns) == [
        ("explorer", "mid"),
        ("explorer", "steady"),
        ("explorer", "tie"),
        ("mid", "steady"),
        ("mid", "tie"),
    ]


def test_spearman_hand_computed_without_and_with_ties():
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(3 / np.sqrt(10))


def test_spearman_drops_missing_pairs_and_rejects_constant_column():
    assert spearman([1, 2, None, 3], [3, 2, 10, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1], [2]) is None


def test_spearman_matches_scipy_with_ties():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 5, 30), rng.integers(0, 5, 30)
    assert spearman(x, y) == pytest.approx(float(stats.spearmanr(x, y).statistic))


def test_learning_zone_selects_tasks_against_hand_computed_posteriors():
    per_task = frame([("mixed", 2, 1), ("unknown", 0, 0), ("solved", 4, 4), ("tb", 6, 4)])
    zone = learning_zone(per_task)
    assert list(zone["task_id"]) == ["mixed", "unknown", "solved", "tb"]
    assert zone["p_zone"].tolist() == pytest.approx(
        [4004 / 4096, 14 / 16, (15 / 16) ** 5 - (1 / 16) ** 5, 0.9929232075810432], abs=1e-12
    )
    assert zone["in_zone"].tolist() == [True, False, False, True]


def test_learning_zone_custom_bounds_and_bad_q():
    zone = learning_zone(frame([("t", 2, 1)]), lo=0.25, hi=0.75, q=0.5)
    # Beta(2,2): F(3/4) - F(1/4) = 11/16
    assert zone["p_zone"].tolist() == pytest.approx([11 / 16])
    assert zone["in_zone"].tolist() == [True]
    with pytest.raises(MetricsInputError, match="q: must be in"):
        learning_zone(frame([("t", 2, 1)]), q=1.5)


def tb_counts():
    """(n, c) per ThinkingBox test from a tb infer results file, skipping system errors."""
    counts = defaultdict(lambda: [0, 0])
    for line in (TB_INFER / "append_r6.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("is_system_error"):
            continue
        meta = record["metadata"]
        name = meta.get("test_name") or meta.get("test_case_name")
        counts[name][0] += 1
        counts[name][1] += int(bool(record["test_result"]["result"]))
    return dict(counts)


def tb_agg_figures():
    text = (TB_INFER / "agg_append_r6.txt").read_text()
    return {f"{kind}{k}": float(v) for kind, k, v in re.findall(r"(pass[@^])(\d+): ([0-9.]+)", text)}


@pytest.mark.skipif(
    not (TB_INFER / "append_r6.jsonl").exists(), reason="shared ThinkingBox sample not present"
)
def test_tb_agg_figures_match_unbiased_pass_at_k_and_plugin_pass_hat_k():
    counts = tb_counts()
    assert counts == {"test_append_some_more_text": [6, 4]}
    printed = tb_agg_figures()
    assert printed == {"pass@1": 0.67, "pass@5": 1.0, "pass^1": 0.67, "pass^5": 0.13}
    n = np.array([v[0] for v in counts.values()])
    c = np.array([v[1] for v in counts.values()])
    for k in (1, 5):
        assert round(float(np.mean(pass_at_k(n, c, k))), 2) == printed[f"pass@{k}"]
        assert round(float(np.mean(pass_hat_k_plugin(n, c, k))), 2) == printed[f"pass^{k}"]
