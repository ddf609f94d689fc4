"""Triage at scale in real headless Chromium: the grouped queue, labelling a whole cluster, the cluster page's
chart and action, the human rubric verdict by keyboard, and every new or changed page for every role."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.attempts.models import Attempt
from apps.triage.models import AttemptReview, Label, RubricVerdict
from apps.triage.selectors import QueueFilters, cluster_index
from tb_engine.results import CheckResult, DiffItem, RubricResult
from tests.support.browser import signed_in_page
from tests.triage.conftest import T1, T2, T3

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LEFT_OPEN = DiffItem("missing_effect", "tickets", "20", "status", "open", "open", "hold")
EXTRA_REFUND = DiffItem("extra_effect", "refunds", "R-1", None, None, {"id": "R-1", "amount": 20}, None, (2,))
WRONG = DiffItem("wrong_value", "tickets", "20", "status", "open", "<b>solved</b>", "hold", (1,))
CHECK = CheckResult(
    "row_equals", "ticket <script>alert(1)</script> resolved", False, "", False, "tickets.status"
)
RUBRIC_TASK = "servicedesk/payroll_request_waits_for_manager"
QUESTIONS = ("Does the reply say the manager has to approve the request first?", "Is the reply polite?")


@pytest.fixture
def scale_data(signed_campaign):
    """More clean-looking failures than a page (so the queue is grouped), in three clusters, plus rubric answers."""
    rows = [(T1, i, {"diff": [LEFT_OPEN]}) for i in range(30)]
    rows += [(T3, i, {"diff": [LEFT_OPEN, EXTRA_REFUND]}) for i in range(15)]
    rows += [(T2, i, {"diff": [WRONG], "checks": [CHECK]}) for i in range(10)]
    a = signed_campaign(rows, name="Alpha <i>model</i>", model="model-a")
    judged = signed_campaign(
        [
            (
                RUBRIC_TASK,
                i,
                {"rubrics": [RubricResult(QUESTIONS[0], True), RubricResult(QUESTIONS[1], False)]},
            )
            for i in range(2)
        ],
        name="Judged",
        model="model-j",
        judge={"kind": "llm", "base_url": "http://127.0.0.1:9/v1", "model": "judge-m"},
    )
    return a, judged


def _page(live_server, client, user):
    return signed_in_page(live_server, client, user)


def test_grouped_queue_labels_a_whole_cluster_in_place(live_server, client, trish, scale_data):
    a, _ = scale_data
    biggest = cluster_index(user=trish, filters=QueueFilters()).clusters[0]
    label = Label.objects.get(name="premature close")
    with _page(live_server, client, trish) as page:
        page.goto(f"{live_server.url}/triage/?c={a.pk}")
        page.evaluate("window.__marker = 'same page'")
        expect(page.locator("tr[data-cluster]")).to_have_count(3)
        assert page.locator("#cluster-count").inner_text().startswith("3 clusters for 55 attempts")

        page.check(f'tr[data-cluster="{biggest.signature}"] input[name="s"]')
        page.select_option("#cluster-label", str(label.pk))
        with page.expect_response(lambda response: "/triage/clusters/act/" in response.url):
            page.click("#cluster-label-add")
        expect(page.locator(f'tr[data-cluster="{biggest.signature}"]')).to_contain_text("30 labelled")

        assert page.evaluate("window.__marker") == "same page"
        labelled = set(AttemptReview.objects.filter(labels=label).values_list("attempt_id", flat=True))
        assert labelled == set(
            Attempt.objects.filter(campaign=a, task__task_id=T1).values_list("pk", flat=True)
        )
        assert page.errors == []


def test_cluster_page_draws_its_campaigns_and_closes_the_cluster(live_server, client, trish, scale_data):
    a, _ = scale_data
    with _page(live_server, client, trish) as page:
        page.goto(f"{live_server.url}/triage/?c={a.pk}")
        page.click("tr[data-cluster] a.open-cluster >> text=failed check")
        expect(page.locator("#cluster-description")).to_contain_text("set ticket status to <b>solved</b>")
        expect(page.locator('.chart[data-chart="chart-cluster"][data-rendered="1"]')).to_have_count(1)
        assert page.locator("#cluster-description b").count() == 0  # imported text stays text
        assert page.locator("#triage-rows tr[data-attempt]").count() == 10

        page.click("#cluster-reviewed")
        page.wait_for_url("**/triage/clusters/**")
        reviewed = AttemptReview.objects.filter(status="reviewed", attempt__task__task_id=T2)
        assert reviewed.count() == 10
        page.click("#triage-rows tr[data-attempt] a.open-attempt >> nth=0")
        page.wait_for_selector("section#triage-panel")
        assert page.locator("#queue-position").inner_text().startswith("1 of 10")  # j/k walk the cluster
        expect(page.locator("#cluster-link")).to_contain_text("9 other attempts failed the same way")
        assert page.errors == []


def test_human_rubric_verdicts_by_keyboard(live_server, client, trish, scale_data):
    _, judged = scale_data
    attempt = judged.attempts.get(index=0)
    with _page(live_server, client, trish) as page:
        page.goto(f"{live_server.url}/attempts/{attempt.pk}/")
        page.wait_for_selector('section#triage-panel .rubric-verdict[data-current][data-position="0"]')
        page.keyboard.press("y")
        page.wait_for_selector('.rubric-verdict[data-position="0"] .verdict-yes[aria-pressed="true"]')
        page.wait_for_selector('.rubric-verdict[data-current][data-position="1"]')
        page.keyboard.press("n")
        page.wait_for_selector('.rubric-verdict[data-position="1"] .verdict-no[aria-pressed="true"]')
        expect(page.locator("#rubric-verdicts .judge-note")).to_contain_text(
            "only 2 human labels (fewer than 30)"
        )

        page.fill("#triage-note", "typing y and n here answers nothing")
        page.click("#save-note")
        page.wait_for_selector("#audit-list li >> text=typing y and n", state="attached")  # history folded
        verdicts = RubricVerdict.objects.filter(attempt=attempt).order_by("position")
        assert [(v.question, v.judge_answer, v.human_answer) for v in verdicts] == [
            (QUESTIONS[0], True, True),
            (QUESTIONS[1], False, False),
        ]
        assert page.errors == []


PAGES = (
    "/triage/",
    "/triage/?view=list",
    "/triage/clusters/{signature}/",
    "/triage/suspects/?status=all",
    "/triage/judges/",
    "/attempts/{attempt}/",
    "/leaderboard/",
    "/gap/",
    "/cost/",
    "/domains/",
    "/noise/",
    "/compare/?a={judged}&b={judged}",
)


@pytest.mark.parametrize("persona", ["bob", "trish", "alice", "admin_user_persona", "charlie"])
def test_every_new_or_changed_page_renders_for_every_role(live_server, client, scale_data, persona, request):
    a, judged = scale_data
    user = request.getfixturevalue(persona)
    values = {
        "signature": cluster_index(user=a.owner, filters=QueueFilters()).clusters[0].signature,
        "attempt": a.attempts.filter(task__task_id=T2).first().pk,
        "judged": judged.pk,
    }
    outsider = persona == "charlie"
    with _page(live_server, client, user) as page:
        missing = []
        page.on("response", lambda r: missing.append((page.url, r.url)) if r.status == 404 else None)
        for path in PAGES:
            url = live_server.url + path.format(**values)
            response = page.goto(url)
            assert response.status == (403 if outsider else 200), url
            if outsider:
                continue
            page.wait_for_load_state("networkidle")
            assert page.locator("script", has_text="alert(1)").count() == 0, url  # imported text escaped
            if "/attempts/" in path:
                page.wait_for_selector("section#triage-panel")
        # Chromium reports a 403 document (and the favicon request of the plain 403 page, which
        # Playwright does not see) as failed resource loads; no other error may appear.
        errors = [e for e in page.errors if not (outsider and e.startswith("Failed to load resource"))]
        assert missing == []
        assert errors == []
