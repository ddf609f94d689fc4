"""Issue 30 item 5: a bulk cluster action says what changed, offers a real undo (exactly those
attempts get their previous labels / assignee / status back) and returns to where the user was."""

from __future__ import annotations

import re

import pytest

from apps.triage.models import AttemptReview, AuditEntry, Label
from apps.triage.selectors import QueueFilters, cluster_index
from apps.triage.services import attempts_bulk_assign, attempts_bulk_label, attempts_bulk_status
from tests.triage.test_clusters import T1, known  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _undo_token(html: str) -> str:
    return re.search(r'name="undo" value="([^"]+)"', html).group(1)


def _state(attempt_ids) -> dict[int, tuple]:
    reviews = {r.attempt_id: r for r in AttemptReview.objects.filter(attempt_id__in=attempt_ids)}
    return {
        pk: (
            sorted(reviews[pk].labels.values_list("name", flat=True)) if pk in reviews else [],
            reviews[pk].assignee_id if pk in reviews else None,
            reviews[pk].status if pk in reviews else "open",
        )
        for pk in attempt_ids
    }


@pytest.fixture
def left_open(known, trish):
    """The 3-attempt cluster (Alpha T1#0, T3#0, Beta T2#0); Alpha T1#0 already carries the label,
    is reviewed and assigned to trish before the bulk action."""
    a, b, _ = known
    cluster = next(c for c in cluster_index(user=trish, filters=QueueFilters()).clusters if c.size == 3)
    already = a.attempts.get(task__task_id=T1, index=0)
    label = Label.objects.get(name="premature close")
    attempts_bulk_label(attempts=[already], label=label, actor=trish)
    attempts_bulk_status(attempts=[already], status="reviewed", actor=trish)
    attempts_bulk_assign(attempts=[already], assignee=trish, actor=trish)
    return cluster, label, already


@pytest.mark.parametrize(
    ("action", "extra"),
    [("label", "label"), ("unlabel", "label"), ("reviewed", None), ("open", None), ("assign", "assignee")],
)
def test_undo_restores_exactly_the_attempts_the_action_changed(
    left_open, known, client, trish, action, extra
):
    cluster, label, _ = left_open
    form = {"query": "", "view": "grouped", "s": [cluster.signature], "action": action}
    if extra == "label":
        form["label"] = label.pk
    if extra == "assignee":
        form["assignee"] = ""  # clear: only the one assigned attempt changes
    # The cluster's three attempts and every other attempt of the campaigns.
    everything = [pk for c in known for pk in c.attempts.values_list("pk", flat=True)]
    client.force_login(trish)
    before = _state(everything)
    audit_before = AuditEntry.objects.count()

    acted = client.post("/triage/clusters/act/", form, HTTP_HX_REQUEST="true").content.decode()
    changed = _state(everything)
    undone = client.post(
        "/triage/clusters/undo/", {"undo": _undo_token(acted), "query": ""}, HTTP_HX_REQUEST="true"
    ).content.decode()

    assert changed != before
    assert _state(everything) == before
    n_changed = sum(changed[pk] != before[pk] for pk in before)
    assert f"Undone: {n_changed} attempt" in undone
    # The action and its undo each leave one audit entry per attempt they changed.
    assert AuditEntry.objects.count() - audit_before == 2 * n_changed
    assert 'id="bulk-undo"' in acted
    assert 'id="bulk-undo"' not in undone


def test_undo_is_refused_to_someone_else_and_when_forged(left_open, client, trish, alice):
    cluster, label, _ = left_open
    client.force_login(trish)
    acted = client.post(
        "/triage/clusters/act/",
        {"query": "", "s": [cluster.signature], "action": "label", "label": label.pk},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    token = _undo_token(acted)
    labelled = set(AttemptReview.objects.filter(labels=label).values_list("attempt_id", flat=True))

    client.force_login(alice)
    theirs = client.post("/triage/clusters/undo/", {"undo": token, "query": ""})
    client.force_login(trish)
    forged = client.post("/triage/clusters/undo/", {"undo": token[:-3] + "abc", "query": ""})

    assert (theirs.status_code, forged.status_code) == (400, 400)
    assert theirs.content.decode() == forged.content.decode() == "not an undo of yours"
    assert set(AttemptReview.objects.filter(labels=label).values_list("attempt_id", flat=True)) == labelled


def test_cluster_page_action_comes_back_to_its_feedback_with_the_undo(left_open, client, trish):
    cluster, label, already = left_open
    page = f"/triage/clusters/{cluster.signature}/"
    client.force_login(trish)

    response = client.post(
        "/triage/clusters/act/",
        {"query": "", "s": [cluster.signature], "action": "reviewed", "next": page},
    )
    shown = client.get(page).content.decode()
    again = client.get(page).content.decode()

    # Back to the page at the feedback, not at its top.
    assert response["Location"] == page + "#bulk-feedback"
    assert (
        'role="status" id="bulk-feedback">Marked reviewed 2 attempts of 3 in 1 cluster (1 already so).'
        in shown
    )
    assert f'<input type="hidden" name="next" value="{page}">' in shown
    assert 'id="bulk-feedback"' not in again  # shown once
    undone = client.post("/triage/clusters/undo/", {"undo": _undo_token(shown), "query": "", "next": page})
    assert undone["Location"] == page + "#bulk-feedback"
    statuses = dict(AttemptReview.objects.values_list("attempt_id", "status"))
    assert {pk: s for pk, s in statuses.items() if s == "reviewed"} == {already.pk: "reviewed"}
