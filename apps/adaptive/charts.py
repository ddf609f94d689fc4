"""Plotly figures of calibrations (pure functions: data in, figure dict out)."""

from __future__ import annotations

from apps.core.charts import PALETTE, clean, layout
from tb_engine.irt.calibration import Calibration


def item_scatter_figure(cal: Calibration) -> dict:
    """Difficulty x discrimination, one trace per domain; tasks with negative discrimination drawn as red x."""
    traces = []
    domains = sorted(set(cal.task_domains))
    for i, domain in enumerate(domains):
        rows = [k for k, d in enumerate(cal.task_domains) if d == domain and cal.discrimination[k] >= 0]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": domain,
                "x": clean([float(cal.difficulty[k]) for k in rows]),
                "y": clean([float(cal.discrimination[k]) for k in rows]),
                "text": [cal.task_ids[k] for k in rows],
                "hovertemplate": "%{text}<br>difficulty %{x:.2f}<br>discrimination %{y:.2f}<extra></extra>",
                "marker": {"color": PALETTE[i % len(PALETTE)], "size": 7, "opacity": 0.8},
            }
        )
    flagged = [k for k in range(cal.n_tasks) if cal.discrimination[k] < 0]
    traces.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "negative discrimination",
            "x": clean([float(cal.difficulty[k]) for k in flagged]),
            "y": clean([float(cal.discrimination[k]) for k in flagged]),
            "text": [cal.task_ids[k] for k in flagged],
            "hovertemplate": "%{text}<br>difficulty %{x:.2f}<br>discrimination %{y:.2f}<extra>flagged</extra>",
            "marker": {"color": "#b3261e", "symbol": "x", "size": 10},
        }
    )
    return {
        "data": traces,
        "layout": layout(
            "Tasks: difficulty × discrimination",
            xaxis={"title": {"text": "difficulty b (logit; higher = harder)"}, "zeroline": False},
            yaxis={"title": {"text": "discrimination a"}, "zeroline": True},
            legend={"orientation": "h", "y": -0.2},
        ),
    }
