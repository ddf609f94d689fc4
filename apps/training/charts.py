"""Plotly figure dicts for the training pages (pure: DataFrame -> figure, tested on data)."""

from __future__ import annotations

import pandas as pd

from apps.figures.chart_style import PALETTE, layout


def zone_probability_figure(table: pd.DataFrame, *, q: float) -> dict:
    """P(lo < p < hi) per task as bars (in-zone tasks coloured), with the q threshold as a line.

    Input columns: task_id, p_zone, in_zone, c, n.
    """
    colours = [PALETTE[2] if inside else "#b8bfcc" for inside in table["in_zone"]]
    hover = [
        f"{t}<br>{c}/{n} passed<br>P(in zone) = {p:.3f}"
        for t, c, n, p in zip(table["task_id"], table["c"], table["n"], table["p_zone"])
    ]
    return {
        "data": [
            {
                "type": "bar",
                "x": list(table["task_id"]),
                "y": [float(p) for p in table["p_zone"]],
                "marker": {"color": colours},
                "hovertext": hover,
                "hoverinfo": "text",
                "name": "P(lo < p < hi)",
            },
        ],
        "layout": layout(
            "P(task in learning zone) per task",
            yaxis={"title": "P(lo < p < hi)", "range": [0, 1.02]},
            xaxis={"showticklabels": len(table) <= 40, "tickangle": -45},
            shapes=[
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": q,
                    "y1": q,
                    "line": {"color": PALETTE[3], "dash": "dash"},
                }
            ],
            showlegend=False,
        ),
    }


def pool_size_figure(qs: list[float], sizes: list[int]) -> dict:
    """Pool size as a function of q (lo and hi fixed)."""
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": qs,
                "y": sizes,
                "line": {"color": PALETTE[0]},
                "name": "tasks",
            }
        ],
        "layout": layout(
            "Pool size by q",
            xaxis={"title": "q"},
            yaxis={"title": "tasks in pool", "rangemode": "tozero"},
            showlegend=False,
        ),
    }
