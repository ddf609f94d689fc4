"""Adaptive fixtures: finished family campaigns on part of the starter suite, a calibration on them,
and a helper that runs an adaptive campaign to its end in this process."""

from __future__ import annotations

import pytest

from tests.campaigns.conftest import drain, make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import _fresh_cache, run_campaign, summaries_campaign  # noqa: F401 (fixtures)

FAMILY = ("family-ace", "family-novice", "family-metronome", "family-coin-flipper", "family-uneven")
TASKS = 15
N = 6


@pytest.fixture
def family_campaigns(run_campaign):
    """Five finished full campaigns of skill-family personas (simulations) on 15 starter tasks, N = 6."""
    return [run_campaign(f"sim:{name}", tasks=TASKS, n=N, name=f"{name} full") for name in FAMILY]


@pytest.fixture
def calibration(family_campaigns, starter_suite, team_a, alice):
    """A calibration on the family campaigns, without the leave-one-out replay (see validated_calibration)."""
    from apps.adaptive.services import calibration_create

    return calibration_create(suite=starter_suite, team=team_a, user=alice, validate=False)


@pytest.fixture
def validated_calibration(family_campaigns, starter_suite, team_a, alice):
    from apps.adaptive.services import calibration_create

    return calibration_create(suite=starter_suite, team=team_a, user=alice)


@pytest.fixture
def run_adaptive(make_campaign, monkeypatch):
    """Create, start and drive an adaptive campaign: dispatcher decision, drain, until it ends."""
    from apps.adaptive.services import adaptive_dispatch
    from apps.campaigns import services
    from apps.campaigns.services import campaign_start

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)

    def run(
        agent: str, *, adaptive: dict | None = None, tasks: int = TASKS, n: int = N, max_rounds: int = 500
    ):
        campaign = make_campaign(agent, tasks=tasks, n=n, adaptive=adaptive or {})
        campaign_start(campaign=campaign)
        for _ in range(max_rounds):
            outcome = adaptive_dispatch(campaign_id=campaign.pk)
            drain(campaign)
            campaign.refresh_from_db()
            if not campaign.is_active:
                return campaign, outcome
        raise AssertionError("adaptive campaign did not finish")

    return run
