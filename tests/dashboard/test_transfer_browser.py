"""Issue 30 item 11 / acceptance in real Chromium: bytes on the wire on a first load (nothing cached,
static files through WhiteNoise as in the demo and production) — every page with charts, the
cluster page included, under 1.5 MB; a sample of pages without charts under 300 KB, without plotly."""

from __future__ import annotations

import pytest

from tb_engine.results import DiffItem
from tests.dashboard.test_acceptance_browser import T1, T2, T3, ten_campaigns  # noqa: F401 (fixture)
from tests.support.browser import signed_in_page, whitenoise_server
from tests.triage.conftest import signed_campaign  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WRONG_STATUS = {"diff": [DiffItem("wrong_value", "tickets", "20", "status", "open", "solved", "hold", (1,))]}
LIGHT_PAGES = (
    "/leaderboard/",
    "/compare/",
    "/campaigns/",
    "/campaigns/new/",
    "/triage/",
    "/glossary/",
    "/tasks/",
    "/decide/?target=80&budget=50",
    "/exports/procurement/",
)
# Plotly's bundle is the weight of a chart page; the page load needs the bundle to be the gzipped one.
PLOTLY = "() => performance.getEntriesByType('resource').filter(e => e.name.includes('plotly')).map(e => [e.encodedBodySize, e.decodedBodySize])"


def _first_load(browser, cookies, url: str) -> tuple[int, list, bool]:
    """Bytes transferred (headers + encoded bodies, as Chromium counted them), plotly's performance
    entries and whether a chart was drawn, for one load in a new context (empty cache)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_cookies(cookies)
    tab = context.new_page()
    finished = []
    tab.on("requestfinished", lambda request: finished.append(request))
    tab.goto(url, wait_until="networkidle")
    sizes = [request.sizes() for request in finished]
    transferred = sum(size["responseBodySize"] + size["responseHeadersSize"] for size in sizes)
    plotly = tab.evaluate(PLOTLY)
    drawn = tab.evaluate("document.querySelectorAll('.js-plotly-plot').length > 0")
    context.close()
    return transferred, plotly, drawn


def test_first_load_transfer_of_chart_pages_and_of_pages_without_charts(
    client, alice, ten_campaigns, signed_campaign, starter_suite, settings
):
    settings.WHITENOISE_USE_FINDERS = True
    failed = signed_campaign([(T1, 0, WRONG_STATUS), (T2, 0, WRONG_STATUS), (T3, 0, {})], name="Failing")
    signature = failed.attempts.exclude(failure_signature=None).values_list(
        "failure_signature__digest", flat=True
    )[0]
    chart_pages = ("/gap/", "/cost/", "/domains/", f"/triage/clusters/{signature}/?scope=failed")
    # Pages that draw charts only with data these campaigns lack (replicate sets, watches, training
    # pools, adaptive runs): with nothing to draw they do not fetch plotly at all.
    no_chart_yet = ("/noise/", "/drift/", "/training/", f"/adaptive/suites/{starter_suite.pk}/")
    heavy, light, drawn = {}, {}, {}
    with whitenoise_server() as server, signed_in_page(server, client, alice) as page:
        browser, cookies = page.context.browser, page.context.cookies()
        for path in chart_pages:
            size, plotly, drew = _first_load(browser, cookies, server.url + path)
            heavy[path] = size
            drawn[path] = (drew, len(plotly) == 1 and plotly[0][0] < plotly[0][1] / 2)
        for path in (*LIGHT_PAGES, *no_chart_yet):
            size, plotly, _ = _first_load(browser, cookies, server.url + path)
            light[path] = (size, plotly)
    # Every chart page loads the gzipped bundle (under half its size on the wire) and draws.
    assert drawn == dict.fromkeys(chart_pages, (True, True)), drawn
    assert {path: size < 1_500_000 for path, size in heavy.items()} == dict.fromkeys(chart_pages, True), heavy
    assert {path: (size < 300_000, plotly) for path, (size, plotly) in light.items()} == dict.fromkeys(
        (*LIGHT_PAGES, *no_chart_yet), (True, [])
    ), light
