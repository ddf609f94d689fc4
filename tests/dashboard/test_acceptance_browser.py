"""Issue 18 acceptance in real Chromium: ten campaigns with $/dependable task on one 1280×800 screen,
no page wider than the window at 1280 and 1920 px, axe-core with no critical or serious violation,
and page weight under 300 KB on first load for pages without charts."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connections
from django.test.testcases import LiveServerThread

from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe-core" / "axe.min.js"
T1, T2, T3 = (
    "retail/ticket_hold_carrier_exception",
    "neobank/freeze_misplaced_card",
    "travel/cancel_flexible_full_refund",
)
# Pages without charts: the weight budget applies to them.
LIGHT_PAGES = (
    "/leaderboard/",
    "/compare/",
    "/campaigns/",
    "/triage/",
    "/glossary/",
    "/tasks/",
    "/exports/procurement/",
)
CHART_PAGES = ("/gap/", "/cost/", "/domains/")


@pytest.fixture
def ten_campaigns(summaries_campaign):
    campaigns = []
    for i in range(10):
        counts = {T1: (4, 4 - i % 5), T2: (4, i % 4), T3: (4, 4)}
        name = f"frontier-model-{i:02d} · temperature 0.{i} · retail + neobank + travel · seed {i}"
        campaigns.append(summaries_campaign(counts, name=name, n=4))
    return campaigns


def _page_width_fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_leaderboard_shows_ten_campaigns_with_cost_per_dependable_task_at_1280x800(
    live_server, client, bob, ten_campaigns
):
    with signed_in_page(live_server, client, bob, viewport=(1280, 800)) as page:
        page.goto(f"{live_server.url}/leaderboard/")
        cells = page.locator("#leaderboard tbody tr[data-campaign] td.cost-dependable")
        assert cells.count() == 10
        boxes = [cells.nth(i).bounding_box() for i in range(10)]
        assert max(box["y"] + box["height"] for box in boxes) <= 800  # all ten rows above the fold
        assert max(box["x"] + box["width"] for box in boxes) <= 1280
        assert _page_width_fits(page)
        # The popover of a metric header opens on keyboard focus.
        page.locator('th a.term[href$="#alln"]').focus()
        tip = page.evaluate("getComputedStyle(document.activeElement, '::after').getPropertyValue('content')")
        assert "solved in every one of the N attempts" in tip
        assert page.errors == []


@pytest.mark.parametrize("viewport", [(1280, 800), (1920, 1080)])
def test_no_page_scrolls_horizontally(live_server, client, alice, ten_campaigns, viewport):
    a, b = ten_campaigns[0], ten_campaigns[1]
    pages = (
        *LIGHT_PAGES,
        *CHART_PAGES,
        f"/compare/?a={a.pk}&b={b.pk}",
        f"/campaigns/{a.pk}/",
        "/campaigns/new/",
    )
    wide = []
    with signed_in_page(live_server, client, alice, viewport=viewport) as page:
        for path in pages:
            page.goto(live_server.url + path, wait_until="load")
            if not _page_width_fits(page):
                wide.append(path)
        assert page.errors == []
    assert wide == []


def test_axe_core_finds_no_critical_or_serious_violations(live_server, client, alice, ten_campaigns):
    a, b = ten_campaigns[0], ten_campaigns[1]
    pages = (
        *LIGHT_PAGES,
        *CHART_PAGES,
        f"/compare/?a={a.pk}&b={b.pk}",
        f"/campaigns/{a.pk}/",
        "/campaigns/new/",
    )
    found = []
    with signed_in_page(live_server, client, alice, viewport=(1280, 800)) as page:
        for path in pages:
            page.goto(live_server.url + path, wait_until="networkidle")
            page.add_script_tag(path=str(AXE))  # injected into the test page only
            result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            for violation in result["violations"]:
                if violation["impact"] in ("critical", "serious"):
                    targets = [node["target"] for node in violation["nodes"][:3]]
                    found.append(f"{path}: {violation['id']} ({violation['impact']}) {targets}")
    assert found == [], "\n".join(found)


def test_pages_without_charts_transfer_under_300_kb_on_first_load(live_server, client, alice, ten_campaigns):
    heavy = {}
    with signed_in_page(live_server, client, alice, viewport=(1280, 800)) as page:
        for path in LIGHT_PAGES:
            context = page.context
            fresh = context.new_page()
            sizes = []
            fresh.on("response", lambda response, sizes=sizes: sizes.append(len(response.body())))
            fresh.goto(live_server.url + path, wait_until="networkidle")
            total = sum(sizes)
            if total >= 300_000:
                heavy[path] = total
            plotly = fresh.evaluate("Array.from(document.scripts).some(s => s.src.includes('plotly'))")
            assert plotly is False, path
            fresh.close()
    assert heavy == {}


@contextmanager
def whitenoise_server():
    """A live server whose static files come through WhiteNoise, as in the demo and production.

    pytest-django's live_server answers /static/ with Django's own static view (no gzip, no cache
    headers), which would measure something no user gets; this one passes every request to the
    project's middleware (WhiteNoise first). Settings must already say WHITENOISE_USE_FINDERS (no collectstatic here).
    """
    shared = {
        alias: connection
        for alias, connection in ((c.alias, c) for c in connections.all())
        if connection.vendor == "sqlite" and connection.is_in_memory_db()
    }
    for connection in shared.values():
        connection.inc_thread_sharing()
    # The thread wraps Django's handler in a media-files handler that, with MEDIA_URL unset, would
    # answer /static/ from the working directory; unwrap it so the project's middleware answers.
    thread = LiveServerThread(
        "localhost", lambda media_handler: media_handler.application, connections_override=shared, port=0
    )
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    try:
        yield SimpleNamespace(url=f"http://localhost:{thread.port}")
    finally:
        thread.terminate()
        for connection in shared.values():
            connection.dec_thread_sharing()


def test_pages_with_charts_transfer_under_1_5_mb_on_first_load(client, alice, ten_campaigns, settings):
    settings.WHITENOISE_USE_FINDERS = True
    transferred, plotly_headers = {}, {}
    with whitenoise_server() as server, signed_in_page(server, client, alice, viewport=(1280, 800)) as page:
        for path in CHART_PAGES:
            fresh = page.context.browser.new_context(viewport={"width": 1280, "height": 800})
            fresh.add_cookies(page.context.cookies())  # signed in, nothing cached: a first load
            tab = fresh.new_page()
            responses = []
            tab.on("requestfinished", lambda request, responses=responses: responses.append(request))
            tab.goto(server.url + path, wait_until="networkidle")
            assert tab.evaluate("document.querySelectorAll('.js-plotly-plot').length") >= 1, path
            # Bytes on the wire as Chromium counted them: headers plus the (encoded) body.
            sizes = [request.sizes() for request in responses]
            transferred[path] = sum(size["responseBodySize"] + size["responseHeadersSize"] for size in sizes)
            for request in responses:
                if "plotly" in request.url:
                    headers = request.response().all_headers()
                    plotly_headers[path] = (headers.get("content-encoding"), headers.get("cache-control"))
            fresh.close()
    assert {path: size < 1_500_000 for path, size in transferred.items()} == dict.fromkeys(CHART_PAGES, True)
    one_year = "max-age=31536000, public, immutable"
    assert plotly_headers == dict.fromkeys(CHART_PAGES, ("gzip", one_year))
