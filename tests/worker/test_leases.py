"""The leases of a process's attempts in flight: one statement per beat for all of them."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.attempts.models import Attempt
from apps.attempts.services import attempt_claim, attempts_heartbeat
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_start
from apps.worker.leases import Leases


class Extensions:
    """A stand-in for the database: records each beat and keeps the ids it is told to keep."""

    def __init__(self, keep: set[int] | None = None, fail: bool = False) -> None:
        self.calls: list[tuple[list[int], str]] = []
        self.keep = keep
        self.fail = fail

    def __call__(self, attempt_ids: list[int], worker: str) -> set[int]:
        self.calls.append((attempt_ids, worker))
        if self.fail:
            raise RuntimeError("database restarting")
        return set(attempt_ids) if self.keep is None else set(attempt_ids) & self.keep


def test_one_beat_extends_every_lease_in_flight_and_tells_the_lost_one():
    extend = Extensions(keep={1, 3})
    leases = Leases(extend)
    held = {n: leases.hold(n, "host:7", every_s=0.0) for n in (1, 2, 3)}

    assert held[2].still_ours() is False
    assert extend.calls == [([1, 2, 3], "host:7")]
    assert (held[1].still_ours(), held[3].still_ours()) == (True, True)
    assert [ids for ids, _ in extend.calls] == [[1, 2, 3], [1, 2, 3], [1, 2, 3]]


def test_no_beat_before_it_is_due():
    extend = Extensions()
    leases = Leases(extend)
    first = leases.hold(1, "host:7", every_s=3600.0)
    leases.hold(2, "host:7", every_s=3600.0)

    assert [first.still_ours() for _ in range(5)] == [True] * 5
    assert extend.calls == []


def test_a_failed_beat_loses_no_lease_and_a_released_one_is_not_extended():
    failing = Extensions(fail=True)
    leases = Leases(failing)
    lease = leases.hold(1, "host:7", every_s=0.0)
    assert lease.still_ours() is True

    extend = Extensions()
    leases = Leases(extend)
    done, running = leases.hold(1, "host:7", every_s=0.0), leases.hold(2, "host:7", every_s=0.0)
    done.release()
    assert running.still_ours() is True
    assert extend.calls == [([2], "host:7")]
    assert leases.in_flight() == 1


@pytest.mark.django_db
def test_attempts_heartbeat_extends_ours_in_one_statement_and_names_the_others(
    make_campaign, django_assert_num_queries
):
    campaign = make_campaign(tasks=3, n=1)
    campaign_start(campaign=campaign)
    ids = list(Attempt.objects.filter(campaign=campaign).order_by("id").values_list("id", flat=True))
    for attempt_id in ids:
        attempt_claim(attempt_id=attempt_id, worker="w:1")
    Attempt.objects.filter(id=ids[1]).update(worker="w:other")  # taken over by the sweep
    Attempt.objects.filter(id__in=ids).update(lease_expires_at=timezone.now())

    with django_assert_num_queries(1):
        kept = attempts_heartbeat(attempt_ids=ids, worker="w:1")

    assert kept == {ids[0], ids[2]}
    leases = dict(Attempt.objects.filter(id__in=ids).values_list("id", "lease_expires_at"))
    assert leases[ids[0]] > leases[ids[1]] and leases[ids[2]] > leases[ids[1]]
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.CANCELLED)
    assert attempts_heartbeat(attempt_ids=ids, worker="w:1") == set()
