"""The dashboard's Plotly figures, built by pure functions DataFrame -> figure dict (tested on data).

The shared look (palette, font, base layout, modebar config) is apps.core.charts.
"""

from __future__ import annotations

import pandas as pd

from apps.core.charts import PALETTE, axis_labels, clean, layout

# Campaign names beside the gap scatter's markers: longer ones are shortened (full name on hover).
GAP_LABEL_LIMIT = 24
# Campaign names on a heatmap's axis (the card is a third of the page wide).
HEATMAP_LABEL_LIMIT = 26


def gap_scatter(frame: pd.DataFrame) -> dict:
    """pass@N observed (x) against all-N share (y) per campaign, with the y = x diagonal.

    Input columns: name, pass_at_n, all_n (shares 0..1). Distance below the diagonal is the gap.
    """
    points = {
        "type": "scatter",
        "mode": "markers+text",
        "name": "campaigns",
        "x": clean(frame["pass_at_n"] * 100),
        "y": clean(frame["all_n"] * 100),
        "text": axis_labels(frame["name"], limit=GAP_LABEL_LIMIT),
        "customdata": list(frame["name"]),
        # A name extends from its marker towards the middle of the plot (left of markers in the
        # right half, right of those in the left half), so it is never cut at the plot's edge;
        # neighbours take turns above and below instead of printing over each other.
        "textposition": [
            f"{('top', 'bottom')[i % 2]} {'left' if x > 50 else 'right'}"
            for i, x in enumerate(frame["pass_at_n"] * 100)
        ],
        "cliponaxis": False,
        # One colour per campaign (its stored colour) when the frame carries it, else the house blue.
        "marker": {"size": 12, "color": list(frame["colour"]) if "colour" in frame else PALETTE[0]},
        "hovertemplate": "%{customdata}<br>pass@N observed %{x:.1f}%<br>all-N %{y:.1f}%<extra></extra>",
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
    # A little room below 0 on both axes: the two "0%" tick labels would otherwise meet at the corner.
    axis = {"range": [-4, 104], "ticksuffix": "%", "gridcolor": "#eef0f3", "zeroline": False}
    return {
        "data": [diagonal, points],
        "layout": layout(
            "Discovery vs reliability",
            xaxis={**axis, "title": {"text": "pass@N observed (solved at least once)"}},
            yaxis={**axis, "title": {"text": "observed all-N (solved every time)"}},
            showlegend=True,
            legend={"orientation": "h", "y": -0.2},
        ),
    }


def pass_hat_k_figure(
    frame: pd.DataFrame, *, title: str = "pass^k by k (unbiased)", colours: dict[str, str] | None = None
) -> dict:
    """Lines of pass^k against k, one per series. Input columns: series, k, value (0..1). `colours`
    maps a series to its campaign's colour (else the palette in order)."""
    # Plain Python, not a pandas groupby: the gap page draws six of these over every campaign, and
    # a groupby + sort per series was two thirds of its time at 100 campaigns.
    by_series: dict[str, list[tuple[int, float | None]]] = {}
    for series, k, value in zip(frame["series"], frame["k"], frame["value"]):
        by_series.setdefault(str(series), []).append((int(k), value))
    traces = []
    for position, (series, points) in enumerate(by_series.items()):
        points.sort(key=lambda point: point[0])
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": series,
                "x": [k for k, _ in points],
                "y": clean(None if value is None else float(value) * 100 for _, value in points),
                "line": {"color": (colours or {}).get(str(series), PALETTE[position % len(PALETTE)])},
                "hovertemplate": f"{series}<br>k = %{{x}}<br>pass^k %{{y:.1f}}%<extra></extra>",
            }
        )
    return {
        "data": traces,
        "layout": layout(
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
                "y": axis_labels(frame.index, limit=HEATMAP_LABEL_LIMIT),
                "customdata": [[str(name)] * len(frame.columns) for name in frame.index],
                "zmin": 0,
                "zmax": 100,
                "colorscale": [[0, "#fdeceb"], [0.5, "#fff3cd"], [1, "#cfe9d8"]],
                "text": [["—" if v is None else f"{v:.0f}%" for v in row] for row in z],
                "texttemplate": "%{text}",
                "hovertemplate": "%{customdata}<br>%{x}: %{z:.1f}%<extra></extra>",
                "colorbar": {"ticksuffix": "%", "len": 0.9},
            }
        ],
        "layout": layout(
            title,
            height=max(220, 60 + 36 * len(frame.index)),
            # Margins grow to the labels (campaign names, domain names) instead of a fixed 200 px
            # that wasted half a narrow card and still cut long domain names.
            margin={"l": 10, "r": 10, "t": 40, "b": 10},
            xaxis={"automargin": True, "tickangle": -30},
            yaxis={"automargin": True},
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
                "y": clean(frame["agent_cost"]),
                "marker": {"color": PALETTE[0]},
                "hovertemplate": "%{x}<br>agent $%{y:.4f}<extra></extra>",
            },
            {
                "type": "bar",
                "name": "evaluation (user simulator, judge)",
                "x": names,
                "y": clean(frame["eval_cost"]),
                "marker": {"color": PALETTE[1]},
                "hovertemplate": "%{x}<br>evaluation $%{y:.4f}<extra></extra>",
            },
        ],
        "layout": layout(
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
        "layout": layout(
            "Agent tokens",
            barmode="stack",
            yaxis={"title": {"text": "tokens"}, "gridcolor": "#eef0f3"},
            legend={"orientation": "h", "y": -0.3},
        ),
    }


def replicate_spread_figure(replicate_set) -> dict:
    """Per figure of a replicate set: the largest observed difference between replicates beside the
    floors the bootstrap predicts (median paired MDD, rerun floor), all in points."""
    labels = [spread.label for spread in replicate_set.spreads]

    def points(attribute: str) -> list:
        return clean(
            [
                None if getattr(s, attribute) is None else getattr(s, attribute) * 100
                for s in replicate_set.spreads
            ]
        )

    bars = (
        ("max_abs_delta", "largest difference between replicates (observed)", PALETTE[3]),
        ("median_pair_mdd", "noise floor: paired MDD (median over pairs)", PALETTE[0]),
        ("rerun_mdd", "noise floor: rerun MDD from each replicate's attempts", PALETTE[5]),
    )
    return {
        "data": [
            {
                "type": "bar",
                "name": name,
                "x": labels,
                "y": points(attribute),
                "marker": {"color": color},
                "hovertemplate": f"%{{x}}<br>{name}: %{{y:.1f}} pp<extra></extra>",
            }
            for attribute, name, color in bars
        ],
        "layout": layout(
            f"Run-to-run spread · {replicate_set.root.name}",
            barmode="group",
            yaxis={"title": {"text": "percentage points"}, "ticksuffix": " pp", "gridcolor": "#eef0f3"},
            legend={"orientation": "h", "y": -0.3},
        ),
    }
