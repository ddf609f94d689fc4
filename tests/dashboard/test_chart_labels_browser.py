"""Issue 30 item 8 in real Chromium: on the gap and domains charts no label is cut or overlaps
another — every axis tick label (and every campaign name on the gap scatter) lies inside its chart
and its card, and no two tick labels of a chart overlap."""

from __future__ import annotations

import pytest

from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

T1, T2, T3 = (
    "retail/ticket_hold_carrier_exception",
    "neobank/freeze_misplaced_card",
    "travel/cancel_flexible_full_refund",
)

# Per chart: its labels' boxes, the plot's box and its card's box (viewport pixels). Rotated tick
# labels are measured as the rotated text's own corners, not the axis-aligned box around them.
MEASURE = """() => [...document.querySelectorAll('.js-plotly-plot')].map((plot, index) => {
  const box = r => ({l: r.left, t: r.top, r: r.right, b: r.bottom});
  const card = plot.closest('.card, .chart-grid > div, section') || plot.parentElement;
  const labels = [...plot.querySelectorAll('g.xtick text, g.ytick text, g.textpoint text')].filter(t => t.textContent.trim());
  return {
    chart: (plot.closest('[data-chart]') || plot).dataset.chart || String(index),
    plot: box(plot.getBoundingClientRect()),
    card: box(card.getBoundingClientRect()),
    labels: labels.map(t => {
      const r = t.getBoundingClientRect();
      return {text: t.textContent, kind: t.closest('g.textpoint') ? 'point' : (t.closest('g.xtick') ? 'x' : 'y'),
              box: box(r), corners: quad(t)};
    }),
  };
  function quad(t) {
    const b = t.getBBox(), m = t.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]].map(
      ([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  }
})"""


def _inside(inner: dict, outer: dict, slack: float = 0.5) -> bool:
    return (
        inner["l"] >= outer["l"] - slack
        and inner["t"] >= outer["t"] - slack
        and inner["r"] <= outer["r"] + slack
        and inner["b"] <= outer["b"] + slack
    )


def _separated(a: list, b: list) -> bool:
    """Two convex quadrilaterals do not overlap (separating axis theorem; touching counts as apart)."""
    for quad in (a, b):
        for i in range(4):
            (x1, y1), (x2, y2) = quad[i], quad[(i + 1) % 4]
            nx, ny = y2 - y1, x1 - x2
            pa = [nx * x + ny * y for x, y in a]
            pb = [nx * x + ny * y for x, y in b]
            if max(pa) <= min(pb) + 0.5 or max(pb) <= min(pa) + 0.5:
                return True
    return False


def _problems(charts: list[dict], path: str) -> list[str]:
    found = []
    for chart in charts:
        where = f"{path} {chart['chart']}"
        for label in chart["labels"]:
            for outer, name in ((chart["plot"], "chart"), (chart["card"], "card")):
                if not _inside(label["box"], outer):
                    found.append(f"{where}: {label['kind']} label {label['text']!r} cut by its {name}")
        ticks = [label for label in chart["labels"] if label["kind"] != "point"]
        for i, a in enumerate(ticks):
            for b in ticks[i + 1 :]:
                if not _separated(a["corners"], b["corners"]):
                    found.append(f"{where}: tick labels {a['text']!r} and {b['text']!r} overlap")
    return found


@pytest.fixture
def long_named_campaigns(summaries_campaign):
    """Ten campaigns with long names over three domains, and one that ran a single domain."""
    campaigns = []
    for i in range(10):
        counts = {T1: (4, 4 - i % 5), T2: (4, i % 4), T3: (4, 4 - i % 3)}
        name = f"frontier-model-{i:02d} · temperature 0.{i} · retail + neobank + travel · seed {i}"
        campaigns.append(summaries_campaign(counts, name=name, n=4))
    return campaigns


@pytest.mark.parametrize("viewport", [(1280, 800), (1920, 1080)])
def test_gap_and_domains_chart_labels_are_whole_and_apart(
    live_server, client, alice, long_named_campaigns, viewport
):
    problems = []
    with signed_in_page(live_server, client, alice, viewport=viewport) as page:
        for path in ("/gap/", "/domains/"):
            page.goto(live_server.url + path)
            page.wait_for_function("document.querySelectorAll('.js-plotly-plot g.xtick text').length > 0")
            page.wait_for_timeout(300)  # plotly's automargin redraw
            charts = page.evaluate(MEASURE)
            assert len(charts) >= 2, path
            problems += _problems(charts, path)
        assert page.errors == []
    assert problems == [], "\n".join(problems)
