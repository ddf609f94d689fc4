"""Plotly figures as plain dicts, built by pure functions DataFrame -> figure (tested on data).

Plain dicts instead of plotly.graph_objects: the same JSON reaches Plotly.newPlot, and building
it takes microseconds instead of the validators' tens of milliseconds per figure.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

PALETTE = ("#2f5bd3", "#d9822b", "#1e7a46", "#b3261e", "#7b4bc4", "#0f8a9d", "#8a6d3b", "#c2185b")
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#1d2330"}
# Shown with every chart: hover and zoom come with Plotly, PNG download is the modebar's camera.
CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "png", "scale": 2}}


def _layout(title: str, **extra: Any) -> dict:
    return {
        "title": {"text": title, "x": 0, "font": {"size": 14}},
        "font": FONT,
        "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "hoverlabel": {"align": "left"},
        **extra,
    }


def _clean(values) -> list:
    # JSON has no NaN; Plotly draws gaps for null.
    return [
        None if value is None or (isinstance(value, float) and math.isnan(value)) else value
        for value in values
    ]


def gap_scatter(frame: pd.DataFrame) -> dict:
    """pass@N observed (x) against all-N share (y) per campaign, with the y = x diagonal.

    Input columns: name, pass_at_n, all_n (shares 0..1). Distance below the diagonal is the gap.
    """
    points = {
        "type": "scatter",
        "mode": "markers+text",
        "name": "campaigns",
        "x": _clean(frame["pass_at_n"] * 100),
        "y": _clean(frame["all_n"] * 100),
        "text": list(frame["name"]),
        "textposition": "top center",
        "marker": {"size": 12, "color": PALETTE[0]},
        "hovertemplate": "%{text}<br>pass@N observed %{x:.1f}%<br>all-N %{y:.1f}%<extra></extra>",
    }
    diagonal = {
        "type": "scatter",
        "mode": "lines",
        "name": "no gap (all-N = pass@N)",
        "x": [0, 100],
        "y": [0, 100],
        "line": {"dash": "dot", "color": "#9aa3b0"},
        "hoverinfo": "skip",
    }
    axis = {"range": [0, 102], "ticksuffix": "%", "gridcolor": "#eef0f3", "zeroline": False}
    return {
        "data": [diagonal, points],
        "layout": _layout(
            "Discovery vs reliability",
            xaxis={**axis, "title": {"text": "pass@N observed (solved at least once)"}},
            yaxis={**axis, "title": {"text": "observed all-N (solved every time)"}},
            showlegend=True,
            legend={"orientation": "h", "y": -0.2},
        ),
    }


def pass_hat_k_figure(frame: pd.DataFrame, *, title: str = "pass^k by k (unbiased)") -> dict:
    """Lines of pass^k against k, one per series. Input columns: series, k, value (0..1)."""
    traces = []
    for position, (series, group) in enumerate(frame.groupby("series", sort=False)):
        group = group.sort_values("k")
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": str(series),
                "x": [int(k) for k in group["k"]],
                "y": _clean(group["value"] * 100),
                "line": {"color": PALETTE[position % len(PALETTE)]},
                "hovertemplate": f"{series}<br>k = %{{x}}<br>pass^k %{{y:.1f}}%<extra></extra>",
            }
        )
    return {
        "data": traces,
        "layout": _layout(
            title,
            xaxis={"title": {"text": "k"}, "dtick": 1, "gridcolor": "#eef0f3"},
            yaxis={"title": {"text": "pass^k"}, "range": [0, 102], "ticksuffix": "%", "gridcolor": "#eef0f3"},
            legend={"orientation": "h", "y": -0.25},
        ),
    }


def heatmap(frame: pd.DataFrame, *, title: str) -> dict:
    """Campaigns (rows) x domains (columns) heatmap of a share. Input: index = campaign, columns = domains."""
    z = [[None if pd.isna(v) else round(float(v) * 100, 1) for v in row] for row in frame.to_numpy()]
    return {
        "data": [
            {
                "type": "heatmap",
                "z": z,
                "x": [str(c) for c in frame.columns],
                "y": [str(i) for i in frame.index],
                "zmin": 0,
                "zmax": 100,
                "colorscale": [[0, "#fdeceb"], [0.5, "#fff3cd"], [1, "#cfe9d8"]],
                "text": [["—" if v is None else f"{v:.0f}%" for v in row] for row in z],
                "texttemplate": "%{text}",
                "hovertemplate": "%{y}<br>%{x}: %{z:.1f}%<extra></extra>",
                "colorbar": {"ticksuffix": "%", "len": 0.9},
            }
        ],
        "layout": _layout(
            title, height=max(220, 60 + 36 * len(frame.index)), margin={"l": 200, "r": 20, "t": 40, "b": 60}
        ),
    }


def cost_bars(frame: pd.DataFrame) -> dict:
    """Stacked bars per campaign: agent cost and evaluation overhead (USD). Input: name, agent_cost, eval_cost."""
    names = list(frame["name"])
    return {
        "data": [
            {
                "type": "bar",
                "name": "agent",
                "x": names,
                "y": _clean(frame["agent_cost"]),
                "marker": {"color": PALETTE[0]},
                "hovertemplate": "%{x}<br>agent $%{y:.4f}<extra></extra>",
            },
            {
                "type": "bar",
                "name": "evaluation (user simulator, judge)",
                "x": names,
                "y": _clean(frame["eval_cost"]),
                "marker": {"color": PALETTE[1]},
                "hovertemplate": "%{x}<br>evaluation $%{y:.4f}<extra></extra>",
            },
        ],
        "layout": _layout(
            "Agent cost vs evaluation overhead",
            barmode="stack",
            yaxis={"title": {"text": "USD"}, "tickprefix": "$", "gridcolor": "#eef0f3"},
            legend={"orientation": "h", "y": -0.3},
        ),
    }


TOKEN_PARTS = (
    ("input_uncached", "input (uncached)"),
    ("cached_input_tokens", "cached input"),
    ("output_visible", "output (visible)"),
    ("reasoning_tokens", "reasoning"),
)


def token_bars(frame: pd.DataFrame) -> dict:
    """Stacked token breakdown per campaign. Input: name, input_tokens, cached_input_tokens, output_tokens, reasoning_tokens."""
    parts = frame.assign(
        input_uncached=frame["input_tokens"] - frame["cached_input_tokens"].clip(upper=frame["input_tokens"]),
        output_visible=frame["output_tokens"] - frame["reasoning_tokens"].clip(upper=frame["output_tokens"]),
    )
    traces = [
        {
            "type": "bar",
            "name": label,
            "x": list(parts["name"]),
            "y": [int(v) for v in parts[column]],
            "marker": {"color": PALETTE[position]},
            "hovertemplate": f"%{{x}}<br>{label}: %{{y:,}}<extra></extra>",
        }
        for position, (column, label) in enumerate(TOKEN_PARTS)
    ]
    return {
        "data": traces,
        "layout": _layout(
            "Agent tokens",
            barmode="stack",
            yaxis={"title": {"text": "tokens"}, "gridcolor": "#eef0f3"},
            legend={"orientation": "h", "y": -0.3},
        ),
    }
