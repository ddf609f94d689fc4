"""Judge calibration: human yes/no on rubric answers, per judge version; numbers equal a hand computation;
notes beside rubric-dependent figures; the drilldown's verdict buttons; page, export and API; query counts."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.triage import services
from apps.triage.models import AuditEntry, RubricVerdict
from apps.triage.selectors import judge_notes, judge_rows
from tb_engine.judges import judge_identity
from tb_engine.results import RubricResult
from tests.api.conftest import api_for  # noqa: F401 (fixture)
from tests.triage.conftest import T2

pytestmark = pytest.mark.django_db

RUBRIC_TASK = "servicedesk/payroll_request_waits_for_manager"
QUESTION = "Does the reply say the manager has to approve the request first?"
JUDGE = {"kind": "llm", "base_url": "http://127.0.0.1:9/v1", "model": "judge-m1"}
# (judge answer, human answer) x count: tp 20, fp 5, fn 10, tn 25 -> kappa 0.5 (see the engine test).
PATTERN = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 25


def _rubric_campaign(signed_campaign, answers, *, name="Judged", model="model-a", judge=JUDGE):
    rows = [
        (RUBRIC_TASK, i, {"rubrics": [RubricResult(QUESTION, answer, "judge said so")]})
        for i, answer in enumerate(answers)
    ]
    return signed_campaign(rows, name=name, model=model, judge=judge)


def _label(campaign, humans, actor):
    for attempt, human in zip(campaign.attempts.order_by("index"), humans):
        services.rubric_verdict_set(attempt=attempt, position=0, human_answer=human, actor=actor)


def test_calibration_equals_a_hand_computation(signed_campaign, trish, bob):
    campaign = _rubric_campaign(signed_campaign, [judge for judge, _ in PATTERN])
    _label(campaign, [human for _, human in PATTERN], trish)

    [row] = judge_rows(campaigns=[campaign])

    matrix = row.calibration.confusion
    assert (matrix.tp, matrix.fp, matrix.fn, matrix.tn) == (20, 5, 10, 25)
    assert (row.labels, row.unjudged, matrix.agreements) == (60, 0, 45)
    assert matrix.tpr == 20 / 30 and matrix.tnr == 25 / 30
    assert row.calibration.kappa == pytest.approx(0.5)
    lo, hi = row.calibration.kappa_lo, row.calibration.kappa_hi
    assert lo < 0.5 < hi
    assert row.key == judge_identity(JUDGE).key
    assert row.note == f"judge {row.identity.label}: κ = 0.50 [{lo:.2f}, {hi:.2f}] on 60 human labels"
    assert judge_notes(campaigns=[campaign])[campaign.pk].text == row.note


def test_each_judge_version_is_calibrated_on_its_own_labels(signed_campaign, trish):
    first = _rubric_campaign(signed_campaign, [True] * 12)
    other_prompt = {**JUDGE, "instructions": "Answer yes or no."}
    second = _rubric_campaign(
        signed_campaign, [False] * 3, name="Other prompt", model="model-b", judge=other_prompt
    )
    _label(first, [True] * 10 + [False] * 2, trish)
    _label(second, [False, None, True], trish)  # None: not labelled
    services.rubric_verdict_set(
        attempt=second.attempts.get(index=1), position=0, human_answer=None, actor=trish
    )

    rows = {row.key: row for row in judge_rows(campaigns=[first, second])}

    one, two = rows[judge_identity(JUDGE).key], rows[judge_identity(other_prompt).key]
    assert (one.labels, one.calibration.confusion.tp, one.calibration.confusion.fp) == (12, 10, 2)
    assert (two.labels, two.calibration.confusion.tn, two.calibration.confusion.fn) == (2, 1, 1)
    assert one.note.endswith("only 12 human labels (fewer than 30), not calibrated")


def test_labels_on_unjudged_answers_are_counted_but_not_compared(signed_campaign, trish):
    campaign = _rubric_campaign(signed_campaign, [None, None, True])
    _label(campaign, [True, False, True], trish)
    [row] = judge_rows(campaigns=[campaign])
    assert (row.labels, row.unjudged, row.calibration.n) == (3, 2, 1)
    stored = RubricVerdict.objects.get(attempt__index=0)
    assert (stored.judge_answer, stored.human_answer, stored.question, stored.agrees) == (
        None,
        True,
        QUESTION,
        None,
    )


def test_changing_and_clearing_a_human_verdict_is_audited(signed_campaign, trish):
    campaign = _rubric_campaign(signed_campaign, [True])
    attempt = campaign.attempts.get()

    services.rubric_verdict_set(attempt=attempt, position=0, human_answer=True, actor=trish)
    services.rubric_verdict_set(attempt=attempt, position=0, human_answer=True, actor=trish)  # unchanged
    services.rubric_verdict_set(attempt=attempt, position=0, human_answer=False, actor=trish)
    services.rubric_verdict_set(attempt=attempt, position=0, human_answer=None, actor=trish)

    entries = list(AuditEntry.objects.filter(attempt=attempt, field="rubric_verdict").order_by("pk"))
    assert [(e.before_text, e.after_text) for e in entries] == [
        ("—", "rubric 1: human yes"),
        ("rubric 1: human yes", "rubric 1: human no"),
        ("rubric 1: human no", "—"),
    ]
    assert not RubricVerdict.objects.exists()


def test_verdict_needs_a_triager_and_an_existing_rubric(signed_campaign, trish, bob):
    from django.core.exceptions import PermissionDenied, ValidationError

    attempt = _rubric_campaign(signed_campaign, [True]).attempts.get()
    with pytest.raises(PermissionDenied):
        services.rubric_verdict_set(attempt=attempt, position=0, human_answer=True, actor=bob)
    with pytest.raises(ValidationError):
        services.rubric_verdict_set(attempt=attempt, position=3, human_answer=True, actor=trish)


def test_drilldown_panel_records_the_human_verdict(signed_campaign, client, trish, bob):
    attempt = _rubric_campaign(signed_campaign, [False, True]).attempts.get(index=0)
    client.force_login(trish)

    html = client.get(f"/triage/attempts/{attempt.pk}/panel/").content.decode()
    assert 'class="rubric-verdict current" data-position="0" data-current="1"' in html
    assert "judge: no" in html and "no human labels yet" in html

    response = client.post(
        f"/triage/attempts/{attempt.pk}/rubrics/0/verdict/", {"answer": "yes"}, headers={"HX-Request": "true"}
    )
    html = response.content.decode()
    assert 'class="label-toggle verdict-yes on" aria-pressed="true"' in html
    assert RubricVerdict.objects.get(attempt=attempt).human_answer is True
    assert "only 1 human label (fewer than 30)" in html
    assert (
        client.post(f"/triage/attempts/{attempt.pk}/rubrics/0/verdict/", {"answer": "maybe"}).status_code
        == 400
    )
    assert (
        client.post(f"/triage/attempts/{attempt.pk}/rubrics/5/verdict/", {"answer": "no"}).status_code == 400
    )
    client.force_login(bob)
    assert (
        client.post(f"/triage/attempts/{attempt.pk}/rubrics/0/verdict/", {"answer": "no"}).status_code == 403
    )
    viewer = client.get(f"/triage/attempts/{attempt.pk}/panel/").content.decode()
    assert "human: yes" in viewer and "verdict-yes" not in viewer


def test_rubric_dependent_figures_carry_the_judge_note(signed_campaign, client, bob, trish):
    judged = _rubric_campaign(signed_campaign, [True] * 3)
    plain = signed_campaign([(T2, 0, {})], name="No rubrics", model="model-z")
    client.force_login(bob)

    for url in (
        "/leaderboard/",
        "/gap/",
        "/cost/",
        "/domains/",
        "/noise/",
        f"/compare/?a={judged.pk}&b={judged.pk}",
    ):
        html = client.get(url).content.decode()
        assert (
            f'<li data-judged-campaign="{judged.pk}" class="uncalibrated">Judged — judge llm judge-m1' in html
        ), url
        assert "no human labels yet" in html, url
        assert f'data-judged-campaign="{plain.pk}" class="uncalibrated"' not in html, url
    assert set(judge_notes(campaigns=[judged, plain])) == {judged.pk}


def test_judge_page_export_and_api_agree(signed_campaign, client, bob, trish, api_for):
    campaign = _rubric_campaign(signed_campaign, [judge for judge, _ in PATTERN])
    _label(campaign, [human for _, human in PATTERN], trish)
    client.force_login(bob)

    html = client.get("/triage/judges/").content.decode()
    lines = client.get("/exports/tables/judges.csv").content.decode().splitlines()
    csv = [line for line in lines if not line.startswith("# ")]  # after the About block
    api = api_for(bob).get("/api/judges/").json()["results"]

    key = judge_identity(JUDGE).key
    assert f'data-judge="{key}"' in html and "κ = 0.50" in html
    assert csv[1].split(",")[1] == key and csv[1].split(",")[5:12] == ["60", "0", "45", "20", "5", "10", "25"]
    judged = next(row for row in api if row["key"] == key)
    assert judged["confusion"] == {"tp": 20, "fp": 5, "fn": 10, "tn": 25}
    assert judged["kappa"] == pytest.approx(0.5) and judged["calibrated"] is True


def test_judge_page_query_count_is_the_same_for_one_and_three_judges(signed_campaign, client, bob):
    client.force_login(bob)
    _rubric_campaign(signed_campaign, [True], name="j1", model="m1")
    with CaptureQueriesContext(connection) as one:
        html = client.get("/triage/judges/").content.decode()
    assert html.count('data-judge="') == 1
    _rubric_campaign(signed_campaign, [True], name="j2", model="m2", judge={**JUDGE, "model": "judge-m2"})
    _rubric_campaign(signed_campaign, [True], name="j3", model="m3", judge={"kind": "keyword"})
    with CaptureQueriesContext(connection) as three:
        html = client.get("/triage/judges/").content.decode()
    assert html.count('data-judge="') == 3
    assert len(one) == len(three)
