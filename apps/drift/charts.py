"""History charts of a watch: each watched figure per run with its 95% interval, the baseline's level
on the same tasks, provider-change boundaries and alerts (plain Plotly dicts, house style)."""

from __future__ import annotations

from collections.abc import Sequence

from apps.core.charts import PALETTE, clean, layout
from apps.drift.selectors import RunView

METRICS = (("pass_at_1", "pass@1"), ("all_n", "all-N share"))


def _pct(value: float | None) -> float | None:
    return None if value is None else round(value * 100, 2)


def history_figure(runs: Sequence[RunView], *, metric: str, title: str) -> dict:
    """One watched figure over the evaluated runs (x = run number)."""
    done = [r for r in runs if r.figures.get(metric)]
    x = [r.run.number for r in done]
    values = [r.figures[metric].get("value") for r in done]
    lo = [r.figures[metric].get("lo") for r in done]
    hi = [r.figures[metric].get("hi") for r in done]
    baseline = [
        (r.vs_baseline.levels.get(metric) or {}).get("other") if r.vs_baseline else None for r in done
    ]
    alert = [r.run.alert for r in done]
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": title,
            "x": x,
            "y": clean([_pct(v) for v in values]),
            "error_y": {
                "type": "data",
                "symmetric": False,
                "array": clean(
                    [None if v is None or h is None else round((h - v) * 100, 2) for v, h in zip(values, hi)]
                ),
                "arrayminus": clean(
                    [
                        None if v is None or low is None else round((v - low) * 100, 2)
                        for v, low in zip(values, lo)
                    ]
                ),
                "color": "#9aa3b0",
            },
            "marker": {
                "size": [12 if a else 8 for a in alert],
                "color": [PALETTE[3] if a else PALETTE[0] for a in alert],
            },
            "line": {"color": PALETTE[0]},
            "hovertemplate": "run %{x}<br>%{y:.1f}%<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "baseline (same tasks)",
            "x": x,
            "y": clean([_pct(v) for v in baseline]),
            "line": {"dash": "dash", "color": PALETTE[2], "shape": "hv"},
            "hovertemplate": "baseline %{y:.1f}%<extra></extra>",
        },
    ]
    boundaries = [r.run.number for r in done if r.run.provider_changed]
    shapes = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": number - 0.5,
            "x1": number - 0.5,
            "y0": 0,
            "y1": 1,
            "line": {"color": PALETTE[1], "dash": "dot", "width": 2},
        }
        for number in boundaries
    ]
    annotations = [
        {
            "x": number - 0.5,
            "y": 1,
            "xref": "x",
            "yref": "paper",
            "text": "provider changed",
            "showarrow": False,
            "yanchor": "bottom",
            "font": {"color": PALETTE[1], "size": 11},
        }
        for number in boundaries
    ]
    return {
        "data": traces,
        "layout": layout(
            title,
            xaxis={"title": {"text": "run"}, "dtick": 1, "gridcolor": "#eef0f3"},
            yaxis={"title": {"text": title}, "range": [0, 102], "ticksuffix": "%", "gridcolor": "#eef0f3"},
            shapes=shapes,
            annotations=annotations,
            legend={"orientation": "h", "y": -0.3},
            height=320,
        ),
    }
