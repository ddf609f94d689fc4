"""Calibration recovers known task parameters from seeded data; storage round trip; dimension choice."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tb_engine.irt import Calibration, CalibrationError, calibrate


def seeded_cells(*, campaigns=12, tasks=60, n=20, seed=3, domains=("a",)):
    """Cells drawn from the model itself: known abilities, difficulties, discriminations, no random effect."""
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1.5, 1.5, campaigns)
    b = rng.normal(0.0, 1.0, tasks)
    a = rng.uniform(0.8, 1.6, tasks)
    rows = []
    for j in range(campaigns):
        p = 1 / (1 + np.exp(-a * (theta[j] - b)))
        c = rng.binomial(n, p)
        for t in range(tasks):
            rows.append((f"c{j:02d}", f"t{t:03d}", domains[t % len(domains)], n, int(c[t])))
    return pd.DataFrame(rows, columns=["campaign", "task_id", "domain", "n", "c"]), a, b, theta


def test_calibration_recovers_known_difficulties_within_tolerance():
    cells, a, b, theta = seeded_cells()
    cal = calibrate(cells)
    # The model's scale is its own (abilities ~ N(0, 1), consistency per campaign): compare after
    # the one linear map that aligns the scales, fitted on the difficulties themselves.
    slope, intercept = np.polyfit(b, cal.difficulty, 1)
    recovered = (cal.difficulty - intercept) / slope
    within = np.abs(b) <= 1.5  # tasks inside the campaigns' ability range (-1.5 .. 1.5)
    assert np.corrcoef(b, cal.difficulty)[0, 1] > 0.97
    assert float(np.abs(recovered - b)[within].max()) < 0.5
    assert float(np.abs(recovered - b).mean()) < 0.2
    assert np.corrcoef(theta, cal.abilities[:, 0])[0, 1] > 0.97
    assert cal.residual_sd < 0.35  # no random effect in the data: the fitted spread stays small
    assert cal.negative_discrimination() == []


def test_calibration_flags_a_task_where_better_campaigns_do_worse():
    cells, _, _, _ = seeded_cells(seed=5)
    # Task t000 reversed: the strongest campaigns fail it, the weakest pass it.
    order = sorted(cells["campaign"].unique())
    for j, name in enumerate(order):
        cells.loc[(cells["campaign"] == name) & (cells["task_id"] == "t000"), "c"] = 20 - round(20 * j / 11)
    cal = calibrate(cells)
    assert cal.negative_discrimination() == ["t000"]


def test_calibration_chooses_one_ability_per_domain_when_domains_differ():
    cells, _, _, _ = seeded_cells(campaigns=10, tasks=40, domains=("x", "y"))
    # Campaigns c00..c04 are strong on x and weak on y, the others the other way round.
    rng = np.random.default_rng(1)
    for index, row in cells.iterrows():
        strong = (row["campaign"] < "c05") == (row["domain"] == "x")
        p = 0.9 if strong else 0.2
        cells.at[index, "c"] = int(rng.binomial(20, p))
    cal = calibrate(cells)
    assert cal.dimensions == ("x", "y")
    assert cal.dimension_note.startswith(
        "one per domain (2 domains, each with ≥ 8 tasks); BIC: one per domain"
    )
    single = calibrate(cells, dimensions="single")
    assert single.dimensions == ("all tasks",)
    assert cal.bic < single.bic


def test_calibration_round_trips_through_json():
    cells, _, _, _ = seeded_cells(campaigns=5, tasks=12)
    cal = calibrate(cells)
    again = Calibration.from_dict(cal.to_dict())
    assert again.task_ids == cal.task_ids
    assert again.dimensions == cal.dimensions
    assert np.array_equal(again.difficulty, cal.difficulty)
    assert np.array_equal(again.ability_cov, cal.ability_cov)
    assert again.to_dict() == cal.to_dict()


def test_calibration_with_latent_factors_fits_loadings_per_task():
    cells, _, _, _ = seeded_cells(campaigns=8, tasks=20)
    cal = calibrate(cells, factors=1)
    assert cal.n_factors == 1
    assert cal.loadings.shape == (20, 1)
    assert cal.ability_mean.shape == (2,)  # one ability and one factor


def test_calibration_refuses_too_few_campaigns_and_bad_cells():
    cells, _, _, _ = seeded_cells(campaigns=2, tasks=5)
    with pytest.raises(
        CalibrationError, match="2 campaign\\(s\\) with done attempts; calibration needs at least 3"
    ):
        calibrate(cells)
    bad = seeded_cells(campaigns=3, tasks=5)[0].assign(c=99)
    with pytest.raises(CalibrationError, match="every c must be between 0 and n"):
        calibrate(bad)
    with pytest.raises(CalibrationError, match="dimensions: must be auto, single or domain"):
        calibrate(seeded_cells(campaigns=3, tasks=5)[0], dimensions="both")
