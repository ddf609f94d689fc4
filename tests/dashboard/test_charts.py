"""Figure builders are pure: DataFrame in, Plotly figure dict out (checked on data, not pixels)."""

from __future__ import annotations

import json

import pandas as pd

from apps.dashboard import charts


def test_gap_scatter_puts_campaigns_in_percent_with_diagonal():
    frame = pd.DataFrame({"name": ["A", "B"], "pass_at_n": [0.9, 0.5], "all_n": [0.3, float("nan")]})

    figure = charts.gap_scatter(frame)

    diagonal, points = figure["data"]
    assert diagonal["x"] == [0, 100] and diagonal["y"] == [0, 100]
    assert points["x"] == [90.0, 50.0]
    assert points["y"] == [30.0, None]  # NaN becomes a gap, never invalid JSON
    assert points["text"] == ["A", "B"]
    # Names extend towards the middle (left of a marker in the right half) and take turns above and below.
    assert points["textposition"] == ["top left", "bottom right"]
    assert points["cliponaxis"] is False  # a name at the edge is never cut
    json.dumps(figure, allow_nan=False)


def test_pass_hat_k_figure_draws_one_line_per_series_sorted_by_k():
    frame = pd.DataFrame({"series": ["A", "A", "B", "B"], "k": [2, 1, 1, 2], "value": [0.25, 0.5, 1.0, None]})

    figure = charts.pass_hat_k_figure(frame)

    assert [trace["name"] for trace in figure["data"]] == ["A", "B"]
    assert figure["data"][0]["x"] == [1, 2]
    assert figure["data"][0]["y"] == [50.0, 25.0]
    assert figure["data"][1]["y"] == [100.0, None]  # undefined pass^k: a gap, never NaN in JSON
    json.dumps(figure, allow_nan=False)


def test_heatmap_labels_cells_and_marks_missing_domains():
    frame = pd.DataFrame({"retail": [0.5, 1.0], "travel": [None, 0.25]}, index=["A", "B"])

    trace = charts.heatmap(frame, title="pass@1")["data"][0]

    assert trace["z"] == [[50.0, None], [100.0, 25.0]]
    assert trace["text"] == [["50%", "—"], ["100%", "25%"]]
    assert trace["y"] == ["A", "B"] and trace["x"] == ["retail", "travel"]
    layout = charts.heatmap(frame, title="pass@1")["layout"]
    assert layout["xaxis"]["automargin"] is True and layout["yaxis"]["automargin"] is True


def test_token_bars_split_cached_input_and_reasoning_out_of_their_totals():
    frame = pd.DataFrame(
        {
            "name": ["A"],
            "input_tokens": [1000],
            "cached_input_tokens": [300],
            "output_tokens": [200],
            "reasoning_tokens": [50],
        }
    )

    traces = charts.token_bars(frame)["data"]

    assert [(t["name"], t["y"]) for t in traces] == [
        ("input (uncached)", [700]),
        ("cached input", [300]),
        ("output (visible)", [150]),
        ("reasoning", [50]),
    ]


def test_cost_bars_stack_agent_and_evaluation_cost():
    frame = pd.DataFrame({"name": ["A", "B"], "agent_cost": [1.5, None], "eval_cost": [0.25, 0.0]})

    figure = charts.cost_bars(frame)

    assert figure["layout"]["barmode"] == "stack"
    assert [t["y"] for t in figure["data"]] == [[1.5, None], [0.25, 0.0]]


def test_axis_labels_keep_start_and_end_of_long_names_and_stay_distinct():
    from apps.core.charts import axis_labels

    names = [
        "short",
        "frontier-model-01 · temperature 0.1 · seed 1",
        "frontier-model-01 · temperature 0.1 · seed 1",
    ]

    labels = axis_labels(names, limit=24)

    assert labels[0] == "short"
    assert (labels[1], len(labels[1])) == ("frontier-mod….1 · seed 1", 24)
    assert labels[2] == labels[1] + "\u200b"
