"""axe-core on every page a user can reach: each 'page' sample path of the smoke test, demo-like data.

The smoke test's sample paths cover every URL pattern (noise, planner, drift, adaptive, attempt,
task, triage health/summary/labels, training, …), so a new page is checked here without a new
line. Pages are opened as the admin, who sees every team's data; Django's own admin site is left
out, and so are DRF's browsable API and the Swagger UI (their markup is not ours). axe-core (vendored under tests/support/vendor, injected
into the test page only) must report no critical and no serious violation.
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


def test_axe_core_finds_no_critical_or_serious_violation_on_any_page(
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
    found, checked = [], []
    with signed_in_page(live_server, client, admin, viewport=(1280, 800)) as page:
        for path in pages:
            try:
                response = page.goto(live_server.url + path, wait_until="networkidle")
            except Exception as exc:  # playwright's Error
                if "Download is starting" in str(exc):
                    continue  # an attachment: no page to audit
                raise
            if (
                response is None
                or response.status != 200
                or "text/html" not in response.headers.get("content-type", "")
            ):
                continue  # a JSON API answer or a download: no page to audit
            if not page.evaluate("document.doctype !== null"):
                continue  # an htmx fragment fetched on its own: audited inside the page that loads it
            checked.append(path)
            page.add_script_tag(path=str(AXE))
            result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            for violation in result["violations"]:
                if violation["impact"] in ("critical", "serious"):
                    targets = [node["target"] for node in violation["nodes"][:3]]
                    found.append(f"{path}: {violation['id']} ({violation['impact']}) {targets}")
    reached = {path.split("?")[0].strip("/").split("/")[0] for path in checked}
    assert found == [], "\n".join(found)
    assert {"noise", "planner", "drift", "adaptive", "attempts", "tasks", "triage", "training"} <= reached
