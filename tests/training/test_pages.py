"""Training pages: pool explorer and before/after report (personas, htmx fragments, figures)."""

from __future__ import annotations

import pytest

from tests.training.test_pools import COUNTS

pytestmark = pytest.mark.django_db


@pytest.fixture
def base(summaries_campaign):
    return summaries_campaign(COUNTS, name="base policy", n=20)


@pytest.mark.parametrize("url", ("/training/", "/training/report/"))
def test_training_pages_refuse_users_without_role(client, charlie, url):
    client.force_login(charlie)
    response = client.get(url)
    assert response.status_code == 403
    assert "this page needs the viewer role" in response.content.decode()


def test_pools_page_shows_posteriors_and_zone(client, bob, base):
    client.force_login(bob)
    response = client.get("/training/", {"campaign": base.pk})
    html = response.content.decode()
    rows = response.context["rows"]
    assert response.status_code == 200
    assert response.context["pool_size"] == 2
    assert [r["task_id"] for r in rows if r["in_zone"]] == [
        "retail/ticket_hold_carrier_exception",
        "travel/downgrade_suite_pending_manager",
    ]
    assert "Beta(5, 3)" in html
    assert response.context["zone_chart"]["figure"]["data"][0]["x"] == [r["task_id"] for r in rows]


def test_pools_page_htmx_thresholds_change_pool(client, bob, base):
    client.force_login(bob)
    response = client.get("/training/", {"campaign": base.pk, "q": "0.999"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.strip().startswith('<div id="pool-body">')
    assert "<h1>" not in html
    assert '<p class="headline" id="pool-size">1 of 4</p>' in html


def test_pools_page_hides_other_teams_campaigns(client, erin, base):
    client.force_login(erin)
    response = client.get("/training/", {"campaign": base.pk})
    assert response.context["campaign"] is None
    assert response.context["rows"] is None


def test_pools_page_warns_on_evaluation_only_suite(client, bob, base):
    base.suite.evaluation_only = True
    base.suite.save(update_fields=["evaluation_only"])
    client.force_login(bob)
    html = client.get("/training/", {"campaign": base.pk}).content.decode()
    assert 'id="evaluation-only"' in html


def test_report_table_gains_losses_and_sharpening(client, bob, summaries_campaign):
    ids = sorted(COUNTS)
    before = summaries_campaign(
        {ids[0]: (20, 20), ids[1]: (20, 3), ids[2]: (20, 1), ids[3]: (20, 10)}, name="base", n=20
    )
    after = summaries_campaign(
        {ids[0]: (20, 19), ids[1]: (20, 20), ids[2]: (20, 0), ids[3]: (20, 20)}, name="trained", n=20
    )
    client.force_login(bob)
    response = client.get("/training/report/", {"base": before.pk, "trained": after.pk})
    result = response.context["result"]
    assert (result["before"]["pass_at_1"], result["after"]["pass_at_1"]) == (
        pytest.approx(34 / 80),
        pytest.approx(59 / 80),
    )
    assert (result["before"]["pass_at_n"], result["after"]["pass_at_n"]) == (1.0, 0.75)
    assert (result["before"]["all_n_count"], result["after"]["all_n_count"]) == (1, 2)
    assert [t["task_id"] for t in result["gained"]] == [ids[1], ids[3]]
    assert [t["task_id"] for t in result["lost"]] == [ids[0]]
    assert [t["task_id"] for t in result["coverage_lost"]] == [ids[2]]
    assert result["sharpening"] is True
    assert 'id="sharpening"' in response.content.decode()


def test_report_refuses_campaigns_on_different_tasks(client, bob, summaries_campaign):
    ids = sorted(COUNTS)
    before = summaries_campaign({ids[0]: (2, 1)}, name="base", n=2)
    after = summaries_campaign({ids[1]: (2, 2)}, name="trained", n=2)
    client.force_login(bob)
    response = client.get("/training/report/", {"base": before.pk, "trained": after.pk})
    assert (
        response.context["error"]
        == "the campaigns ran different tasks (1 only in trained, 1 only in base); a before/after report needs the same tasks"
    )


def test_report_strip_counts_forbidden_side_effects(client, bob, run_campaign):
    task_id = "retail/ticket_hold_carrier_exception"
    careless = run_campaign("sim:careless", tasks=1, n=6, task_ids=[task_id], name="careless base")
    golden = run_campaign("golden", tasks=1, n=6, task_ids=[task_id], name="golden trained")
    task = golden.tasks.get()
    client.force_login(bob)
    response = client.get("/training/report/", {"base": careless.pk, "trained": golden.pk, "task": task.pk})
    strips = response.context["strips"]
    careless_attempts = list(careless.attempts.filter(status="done"))
    expected_violations = sum(1 for a in careless_attempts if "extra_effect" in a.categories)
    assert [(s["campaign"].name, s["done"]) for s in strips] == [("careless base", 6), ("golden trained", 6)]
    assert strips[0]["violations"] == expected_violations
    assert (strips[1]["violations"], strips[1]["passes"]) == (0, 6)
    assert response.content.decode().count('class="card strip-card"') == 2


def test_pools_page_band_with_reference_campaign(client, bob, base, summaries_campaign):
    from tests.training.test_pools import REFERENCE_COUNTS

    reference = summaries_campaign(REFERENCE_COUNTS, name="reference policy", n=5)
    client.force_login(bob)
    query = {
        "campaign": base.pk,
        "select": "band",
        "band_lo": "0.5",
        "band_hi": "1",
        "reference": reference.pk,
    }
    response = client.get("/training/", query)
    html = response.content.decode()
    assert (response.status_code, response.context["errors"]) == (200, [])
    assert [r["task_id"] for r in response.context["rows"] if r["selected"]] == [
        "neobank/freeze_misplaced_card",
        "travel/downgrade_suite_pending_manager",
    ]
    assert response.context["unsolved_by_reference"] == 2
    assert "unsolved by reference" in html and "not run" in html
    assert "base pass rate c/n is in [0.5000, 1.0000] and solved at least once by reference policy" in html


def test_training_pool_api_returns_the_pool_document(client, bob, base, summaries_campaign):
    from tests.training.test_pools import REFERENCE_COUNTS

    reference = summaries_campaign(REFERENCE_COUNTS, name="reference policy", n=5)
    client.force_login(bob)
    data = client.get("/api/training/pool/", {"campaign": base.pk, "reference": reference.pk}).json()
    assert [t["task_id"] for t in data["tasks"]] == ["travel/downgrade_suite_pending_manager"]
    assert (data["candidates"], data["selection"]["method"], data["selection"]["unsolved_by_reference"]) == (
        4,
        "zone",
        2,
    )
    bad = client.get(
        "/api/training/pool/", {"campaign": base.pk, "select": "band", "band_lo": 0.9, "band_hi": 0.1}
    )
    assert bad.status_code == 400
    assert "band: need 0 <= band_lo <= band_hi <= 1" in bad.content.decode()
    assert client.get("/api/training/pool/", {"campaign": 999999}).status_code == 404
