"""SignatureCount (SPEC §8 clusters' count table) always equals a fresh recount of the attempts: after
recording (both record paths), a cancel and resume, infra-error retries, a backfill and labelling."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from apps.agents.models import AgentConfig
from apps.attempts.models import Attempt, AttemptSignature, SignatureCount
from apps.attempts.services import attempts_backfill_signatures
from apps.attempts.summaries import summary_refresh
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_cancel, campaign_resume, campaign_start
from apps.core.services import assign_role
from apps.worker.attempts import attempt_execute
from tests.campaigns.conftest import drain
from tests.campaigns.test_services import _dead_endpoint_agent


def _recount() -> dict[tuple, tuple]:
    """The table's content computed in Python from the attempts themselves."""
    groups: dict[tuple, list[Attempt]] = {}
    for attempt in Attempt.objects.filter(status="done", verdict="fail"):
        key = (attempt.campaign_id, attempt.task_id, attempt.signature, attempt.termination)
        groups.setdefault(key, []).append(attempt)
    found = {}
    for key, attempts in groups.items():
        ids = [a.pk for a in attempts]
        clean = [a.pk for a in attempts if a.clean_looking]
        found[key] = (
            len(ids),
            len(clean),
            min(ids),
            max(ids),
            min(clean) if clean else None,
            max(clean) if clean else None,
        )
    return found


def _stored() -> dict[tuple, tuple]:
    return {
        (row.campaign_id, row.task_id, row.signature, row.termination): (
            row.failures,
            row.clean,
            row.first_id,
            row.last_id,
            row.first_clean_id,
            row.last_clean_id,
        )
        for row in SignatureCount.objects.all()
    }


def _assert_equal_to_recount() -> None:
    recount = _recount()
    assert recount  # failures exist, so the comparison says something
    assert _stored() == recount


def _careless_with_resume(make_campaign) -> Campaign:
    """A sim:careless campaign run partly, cancelled, resumed and finished."""
    campaign = make_campaign("sim:careless", tasks=6, n=4)
    campaign_start(campaign=campaign)
    for attempt_id in Attempt.objects.filter(campaign=campaign, status="queued").values_list("id", flat=True)[
        :5
    ]:
        attempt_execute(attempt_id=attempt_id, worker="w:1")
    campaign_cancel(campaign=campaign)
    assert Attempt.objects.filter(campaign=campaign, status="cancelled").exists()
    campaign_resume(campaign=Campaign.objects.get(pk=campaign.pk))
    drain(campaign)
    return campaign


@pytest.mark.django_db
def test_counts_follow_records_resumes_retries_backfills_and_labels(make_campaign, settings):
    careless = _careless_with_resume(make_campaign)
    _assert_equal_to_recount()

    # Infra errors retried, then the endpoint "comes back" as the careless persona and the rerun fails.
    settings.ATTEMPT_MAX_RETRIES = 1
    agent = _dead_endpoint_agent()
    flaky = make_campaign(agent, tasks=2, n=2)
    campaign_start(campaign=flaky)
    drain(flaky)
    assert set(Attempt.objects.filter(campaign=flaky).values_list("retries", flat=True)) == {1}
    AgentConfig.objects.filter(pk=agent.pk).update(
        kind=AgentConfig.Kind.SIMULATED, persona="careless", model="sim-careless", base_url=""
    )
    campaign_resume(campaign=Campaign.objects.get(pk=flaky.pk))
    drain(flaky)
    assert Attempt.objects.filter(campaign=flaky, status="done").count() == 4
    _assert_equal_to_recount()

    # A backfill over attempts stored without signatures recounts their campaign.
    recorded = _stored()
    AttemptSignature.objects.filter(campaign=careless).delete()
    summary_refresh(campaign_id=careless.pk)  # as stored before signatures existed (the migration's fill)
    _assert_equal_to_recount()
    assert {key[2] for key in _stored() if key[0] == careless.pk} == {""}
    report = attempts_backfill_signatures(campaign_ids=[careless.pk])
    assert report.changed == Attempt.objects.filter(campaign=careless, verdict="fail").count()
    _assert_equal_to_recount()
    assert _stored() == recorded

    # Labelling a whole cluster changes reviews, not the counts.
    from apps.triage.models import Label
    from apps.triage.services import attempts_bulk_label

    triager = get_user_model().objects.create_user(username="tess", password="pw")
    assign_role(user=triager, role="triager")
    signature = Attempt.objects.filter(campaign=careless, verdict="fail").values_list(
        "failure_signature__digest", flat=True
    )[0]
    labelled = attempts_bulk_label(
        attempts=Attempt.objects.filter(failure_signature__digest=signature),
        label=Label.objects.first(),
        actor=triager,
    )
    assert labelled == Attempt.objects.filter(failure_signature__digest=signature).count()
    _assert_equal_to_recount()
    assert _stored() == recorded

    # Deleting a campaign deletes its rows with it.
    flaky_rows = {key for key in _stored() if key[0] == flaky.pk}
    assert flaky_rows
    Attempt.objects.filter(campaign=flaky).delete()
    Campaign.objects.filter(pk=flaky.pk).delete()
    _assert_equal_to_recount()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_one_query_record_path_keeps_the_counts(careless_in_one_query):
    _assert_equal_to_recount()
