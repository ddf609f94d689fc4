"""Triage's Plotly figures, built by pure functions (plain data -> figure dict, tested on data).

The shared look is apps.core.charts.
"""

from __future__ import annotations

from collections.abc import Sequence

from apps.core.charts import PALETTE, layout


def cluster_campaign_bars(shares: Sequence) -> dict:
    """One bar per campaign: the cluster's attempts there, hover giving its share of that campaign's failures.

    ``shares`` are items with ``name``, ``attempts`` (of the cluster) and ``failures`` (of the campaign in
    the view's scope); campaigns without any of the cluster's attempts keep their bar at zero, so the
    chart shows where the mistake is absent too.
    """
    names = [share.name for share in shares]
    counts = [share.attempts for share in shares]
    of_failures = [round(100 * s.attempts / s.failures, 1) if s.failures else 0.0 for s in shares]
    bars = {
        "type": "bar",
        "name": "attempts in this cluster",
        "x": names,
        "y": counts,
        "customdata": [[pct, s.failures] for pct, s in zip(of_failures, shares)],
        "marker": {"color": PALETTE[0]},
        "hovertemplate": "%{x}<br>%{y} attempts: %{customdata[0]}% of its %{customdata[1]} failures here<extra></extra>",
    }
    return {
        "data": [bars],
        "layout": layout(
            "This cluster by campaign",
            xaxis={"title": {"text": "campaign"}, "automargin": True},
            yaxis={"title": {"text": "attempts"}, "rangemode": "tozero", "gridcolor": "#eef0f3"},
            showlegend=False,
        ),
    }
