"""axe-core, page width and page weight on every page a user can reach: each 'page' sample path of
the smoke test, demo-like data (issue 18's acceptance).

The smoke test's sample paths cover every URL pattern (noise, planner, drift, adaptive, attempt,
task, triage health/summary/labels, training, …), so a new page is checked here without a new
line. Pages are opened as the admin, who sees every team's data; Django's own admin site is left
out, and so are DRF's browsable API and the Swagger UI (their markup is not ours). axe-core (vendored under tests/support/vendor, injected
into the test page only) must report no critical and no serious violation; no page may be wider
than the window at 1280×800 and 1920×1080; a page without charts (no Plotly) must weigh under
300 KB: its HTML and every resource it loads, uncompressed (an upper bound of what it transfers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.smoke.demo_data import build_demo_data
from tests.smoke.test_every_page import sample_paths
from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Markup that is not ours: Django's admin site, DRF's browsable API and the Swagger UI at /api/docs/
# (the API's HTML face for developers; its JSON is what clients use), and logging out.
THIRD_PARTY = ("/admin/", "/api/", "/accounts/logout/")
AXE = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe-core" / "axe.min.js"
WEIGHT_BUDGET = 300_000  # bytes, pages without charts
# The page's own HTML plus every resource it loaded, decoded sizes (cache hits report them too).
WEIGHT = """() => performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
  .reduce((total, entry) => total + (entry.decodedBodySize || 0), 0)"""
FITS = "document.documentElement.scrollWidth <= window.innerWidth"
CHARTS = "Array.from(document.scripts).some(s => s.src.includes('plotly'))"


def _html_page(page, url: str) -> bool:
    """Open url; False for what is not a page of ours to audit (a download, JSON, an htmx fragment)."""
    try:
        response = page.goto(url, wait_until="networkidle")
    except Exception as exc:  # playwright's Error
        if "Download is starting" in str(exc):
            return False  # an attachment: no page to audit
        raise
    if (
        response is None
        or response.status != 200
        or "text/html" not in response.headers.get("content-type", "")
    ):
        return False  # a JSON API answer or a download: no page to audit
    # An htmx fragment fetched on its own is audited inside the page that loads it.
    return bool(page.evaluate("document.doctype !== null"))


def test_every_page_passes_axe_core_fits_the_window_and_keeps_its_weight(
    live_server,
    client,
    run_campaign,
    make_campaign,
    starter_suite,
    team_a,
    team_b,
    alice,
    trish,
    erin,
    make_user,
):
    admin = make_user("ada", role="admin", is_staff=True)
    data = build_demo_data(
        run_campaign=run_campaign,
        make_campaign=make_campaign,
        starter_suite=starter_suite,
        team_a=team_a,
        team_b=team_b,
        alice=alice,
        trish=trish,
        erin=erin,
    )
    pages = sorted(
        {
            path
            for paths in sample_paths(data).values()
            for kind, path in paths
            if kind == "page" and not path.startswith(THIRD_PARTY)
        }
    )
    found, checked, wide, heavy = [], [], [], {}
    with signed_in_page(live_server, client, admin, viewport=(1280, 800)) as page:
        for path in pages:
            if not _html_page(page, live_server.url + path):
                continue
            checked.append(path)
            if not page.evaluate(FITS):
                wide.append(f"{path} at 1280")
            if not page.evaluate(CHARTS) and (weight := page.evaluate(WEIGHT)) >= WEIGHT_BUDGET:
                heavy[path] = weight
            page.add_script_tag(path=str(AXE))
            result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            for violation in result["violations"]:
                if violation["impact"] in ("critical", "serious"):
                    targets = [node["target"] for node in violation["nodes"][:3]]
                    found.append(f"{path}: {violation['id']} ({violation['impact']}) {targets}")
    with signed_in_page(live_server, client, admin, viewport=(1920, 1080)) as page:
        for path in checked:
            if _html_page(page, live_server.url + path) and not page.evaluate(FITS):
                wide.append(f"{path} at 1920")
    reached = {path.split("?")[0].strip("/").split("/")[0] for path in checked}
    assert found == [], "\n".join(found)
    assert wide == []
    assert heavy == {}
    assert {"noise", "planner", "drift", "adaptive", "attempts", "tasks", "triage", "training"} <= reached
    # The triage-at-scale pages are among them: a cluster, the suspect tasks, the judges.
    assert {"/triage/suspects/", "/triage/judges/"} <= set(checked)
    assert any(path.startswith("/triage/clusters/") for path in checked)
