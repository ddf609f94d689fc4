"""Pool selection matches hand-computed posteriors; the command writes provenance and refuses evaluation-only suites."""

from __future__ import annotations

import json
from math import comb

import pytest
from django.core.management import CommandError, call_command

from apps.training.management.commands.serve_training_env import environment_for_pool
from apps.training.selectors import Selection, Thresholds, posterior_table, selection_table

LO, HI = 1 / 16, 15 / 16
COUNTS = {
    "retail/ticket_hold_carrier_exception": (6, 4),
    "travel/downgrade_suite_pending_manager": (20, 10),
    "neobank/freeze_misplaced_card": (20, 20),
    "insurance/shop_says_unpaid_no_second_payout": (20, 0),
}


def beta_5_3_cdf(x: float) -> float:
    """Beta(5, 3) CDF by hand: density 105 x^4 (1 - x)^2, integrated term by term."""
    return 105 * (x**5 / 5 - 2 * x**6 / 6 + x**7 / 7)


def beta_cdf_by_binomial(x: float, a: int, b: int) -> float:
    """I_x(a, b) = P(Binomial(a + b - 1, x) >= a) for integer a, b."""
    m = a + b - 1
    return sum(comb(m, j) * x**j * (1 - x) ** (m - j) for j in range(a, m + 1))


@pytest.fixture
def base(summaries_campaign, starter_suite):
    present = set(starter_suite.tasks.values_list("task_id", flat=True))
    counts = {task_id: value for task_id, value in COUNTS.items() if task_id in present}
    assert len(counts) == 4
    return summaries_campaign(counts, name="base policy", n=20)


def test_posterior_table_matches_hand_computed_posteriors(base):
    table = posterior_table(base).set_index("task_id")
    expected_6_4 = beta_5_3_cdf(HI) - beta_5_3_cdf(LO)
    expected_20_10 = beta_cdf_by_binomial(HI, 11, 11) - beta_cdf_by_binomial(LO, 11, 11)
    row = table.loc["retail/ticket_hold_carrier_exception"]
    assert (row["alpha"], row["beta"]) == (5, 3)
    assert row["p_zone"] == pytest.approx(expected_6_4, abs=1e-12)
    assert round(row["p_zone"], 3) == 0.993
    assert table.loc["travel/downgrade_suite_pending_manager", "p_zone"] == pytest.approx(
        expected_20_10, abs=1e-12
    )
    # Beta(21, 1): CDF x^21, so P(lo < p < hi) = hi^21 - lo^21.
    assert table.loc["neobank/freeze_misplaced_card", "p_zone"] == pytest.approx(HI**21 - LO**21, abs=1e-12)
    assert table["in_zone"].to_dict() == {
        "insurance/shop_says_unpaid_no_second_payout": False,
        "neobank/freeze_misplaced_card": False,
        "retail/ticket_hold_carrier_exception": True,
        "travel/downgrade_suite_pending_manager": True,
    }


def test_posterior_table_zone_follows_thresholds(base):
    strict = posterior_table(base, Thresholds(q=0.999))
    assert sorted(strict[strict["in_zone"]]["task_id"]) == ["travel/downgrade_suite_pending_manager"]


def test_select_training_pool_writes_pool_with_provenance(base, tmp_path):
    out = tmp_path / "pool.json"
    call_command("select_training_pool", "--campaign", str(base.pk), "--out", str(out))
    pool = json.loads(out.read_text())
    assert [t["task_id"] for t in pool["tasks"]] == [
        "retail/ticket_hold_carrier_exception",
        "travel/downgrade_suite_pending_manager",
    ]
    assert pool["tasks"][0]["posterior"] == {"alpha": 5.0, "beta": 3.0, "mean": 0.625}
    assert pool["base_campaign"]["id"] == base.pk
    assert pool["thresholds"]["q"] == 0.95
    assert pool["suite"]["name"] == "starter"
    assert pool["candidates"] == 4


def test_select_training_pool_refuses_evaluation_only_suite(base, tmp_path):
    base.suite.evaluation_only = True
    base.suite.save(update_fields=["evaluation_only"])
    out = tmp_path / "pool.json"
    with pytest.raises(CommandError) as refused:
        call_command("select_training_pool", "--campaign", str(base.pk), "--out", str(out))
    assert str(refused.value) == (
        f"campaign {base.pk} (base policy) ran suite starter v{base.suite.version}, which is evaluation-only: "
        "its licence forbids training on its tasks. Pass --allow-evaluation-only to override."
    )
    assert out.exists() is False
    call_command(
        "select_training_pool", "--campaign", str(base.pk), "--out", str(out), "--allow-evaluation-only"
    )
    assert json.loads(out.read_text())["allow_evaluation_only"] is True


def test_select_training_pool_rejects_bad_thresholds(base, tmp_path):
    with pytest.raises(CommandError) as caught:
        call_command(
            "select_training_pool",
            "--campaign",
            str(base.pk),
            "--lo",
            "0.9",
            "--hi",
            "0.1",
            "--out",
            str(tmp_path / "p.json"),
        )
    assert (
        str(caught.value)
        == "--lo/--hi/--q: learning_zone: lo, hi: need 0 <= lo < hi <= 1, got lo=0.9, hi=0.1"
    )


def test_serve_training_env_serves_the_pool_and_refuses_evaluation_only(base, tmp_path):
    out = tmp_path / "pool.json"
    call_command("select_training_pool", "--campaign", str(base.pk), "--out", str(out))
    env = environment_for_pool(str(out), allow_evaluation_only=False)
    assert env.pool == ["retail/ticket_hold_carrier_exception", "travel/downgrade_suite_pending_manager"]
    base.suite.evaluation_only = True
    base.suite.save(update_fields=["evaluation_only"])
    with pytest.raises(CommandError) as refused:
        environment_for_pool(str(out), allow_evaluation_only=False)
    assert str(refused.value).startswith("suite starter v")
    assert str(refused.value).endswith(
        "is evaluation-only: its licence forbids training on its tasks. Pass --allow-evaluation-only to override."
    )


def test_serve_training_env_refuses_a_worker_count_out_of_range(base, tmp_path):
    out = tmp_path / "pool.json"
    call_command("select_training_pool", "--campaign", str(base.pk), "--out", str(out))

    with pytest.raises(CommandError) as refused:
        call_command("serve_training_env", "--pool", str(out), "--workers", "0")

    assert str(refused.value).startswith("--workers: expected 1..")


REFERENCE_COUNTS = {  # a stronger policy, 5 attempts per task; it never ran the insurance task
    "retail/ticket_hold_carrier_exception": (5, 0),
    "travel/downgrade_suite_pending_manager": (5, 2),
    "neobank/freeze_misplaced_card": (5, 5),
}


@pytest.fixture
def reference(summaries_campaign):
    return summaries_campaign(REFERENCE_COUNTS, name="reference policy", n=5)


def test_band_selection_keeps_base_pass_rates_inside_the_band(base):
    table = selection_table(base, selection=Selection("band", 0.6, 1.0)).set_index("task_id")
    assert table["rate"].to_dict() == {
        "insurance/shop_says_unpaid_no_second_payout": 0.0,
        "neobank/freeze_misplaced_card": 1.0,
        "retail/ticket_hold_carrier_exception": 4 / 6,
        "travel/downgrade_suite_pending_manager": 0.5,
    }
    assert sorted(table.index[table["selected"]]) == [
        "neobank/freeze_misplaced_card",
        "retail/ticket_hold_carrier_exception",
    ]


def test_reference_campaign_drops_tasks_it_never_solved(base, reference):
    table = selection_table(base, selection=Selection("zone", reference=reference)).set_index("task_id")
    assert table[["ref_n", "ref_c"]].to_dict("index") == {
        "insurance/shop_says_unpaid_no_second_payout": {"ref_n": -1, "ref_c": -1},
        "neobank/freeze_misplaced_card": {"ref_n": 5, "ref_c": 5},
        "retail/ticket_hold_carrier_exception": {"ref_n": 5, "ref_c": 0},
        "travel/downgrade_suite_pending_manager": {"ref_n": 5, "ref_c": 2},
    }
    # zone {retail, travel} ∩ solved by the reference {travel, neobank}
    assert list(table.index[table["selected"]]) == ["travel/downgrade_suite_pending_manager"]


def test_select_training_pool_band_and_reference_recorded_in_the_file(base, reference, tmp_path):
    out = tmp_path / "pool.json"
    args = ["--campaign", str(base.pk), "--select", "band", "--band-lo", "0.5", "--band-hi", "1"]
    call_command("select_training_pool", *args, "--reference", str(reference.pk), "--out", str(out))
    pool = json.loads(out.read_text())
    assert [t["task_id"] for t in pool["tasks"]] == [
        "neobank/freeze_misplaced_card",
        "travel/downgrade_suite_pending_manager",
    ]
    assert pool["tasks"][1]["reference"] == {"n": 5, "c": 2}
    assert pool["tasks"][1]["pass_rate"] == 0.5
    assert pool["selection"] == {
        "method": "band",
        "band": {"lo": 0.5, "hi": 1.0, "of": "base pass rate c/n"},
        "reference_campaign": {"id": reference.pk, "name": "reference policy", "agent": reference.agent.name},
        "unsolved_by_reference": 2,
    }


def test_select_training_pool_rejects_an_inverted_band_and_unknown_reference(base, tmp_path):
    out = str(tmp_path / "pool.json")
    with pytest.raises(CommandError, match=r"band: need 0 <= band_lo <= band_hi <= 1, got 0.9..0.1"):
        call_command(
            "select_training_pool",
            "--campaign",
            str(base.pk),
            "--select",
            "band",
            "--band-lo",
            "0.9",
            "--band-hi",
            "0.1",
            "--out",
            out,
        )
    with pytest.raises(CommandError, match="--reference: no campaign with id 999999"):
        call_command(
            "select_training_pool", "--campaign", str(base.pk), "--reference", "999999", "--out", out
        )
