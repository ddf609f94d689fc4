"""The adaptive option through the API and run_campaign --adaptive; calibrate_suite."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from tests.adaptive.conftest import family_campaigns  # noqa: F401 (fixture)
from tests.api.conftest import api_for, error_of  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _body(suite, team, **extra):
    from apps.agents.services import agent_config_for

    agent = agent_config_for("sim:family-ace")
    return {
        "name": "adaptive via api",
        "team": team.pk,
        "agent": agent.pk,
        "suite": suite.pk,
        "n_attempts": 20,
        **extra,
    }


def test_api_creates_an_adaptive_campaign(api_for, alice, starter_suite, team_a):
    body = _body(starter_suite, team_a, adaptive={"budget_share": 0.2, "target_se": 0.01})
    response = api_for(alice).post("/api/campaigns/", body, format="json")
    data = response.json()
    assert response.status_code == 201
    assert data["adaptive"] is True
    assert data["adaptive_options"]["budget_share"] == 0.2
    assert data["adaptive_options"]["n_attempts"] == 20
    assert data["adaptive_options"]["calibration"] is None


def test_api_full_campaigns_say_they_are_not_adaptive(api_for, alice, starter_suite, team_a):
    response = api_for(alice).post("/api/campaigns/", _body(starter_suite, team_a), format="json")
    assert response.json()["adaptive"] is False
    assert response.json()["adaptive_options"] == {}


def test_api_rejects_a_calibration_of_another_team(api_for, alice, starter_suite, team_a, team_b):
    from apps.adaptive.models import Calibration

    other = Calibration.objects.create(
        suite=starter_suite, team=team_b, version=1, campaigns_key="k" * 64, model={}
    )
    body = _body(starter_suite, team_a, adaptive={"calibration": other.pk})
    response = api_for(alice).post("/api/campaigns/", body, format="json")
    assert response.status_code == 400
    assert error_of(response)["details"] == {
        "adaptive": {"calibration": ["not a calibration of this suite for the team"]}
    }


def test_api_names_an_adaptive_option_out_of_range(api_for, alice, starter_suite, team_a):
    body = _body(starter_suite, team_a, adaptive={"budget_share": 1.5})
    response = api_for(alice).post("/api/campaigns/", body, format="json")
    assert response.status_code == 400
    assert error_of(response)["details"] == {
        "adaptive": {"budget_share": ["Ensure this value is less than or equal to 1.0."]}
    }


def test_run_campaign_adaptive_creates_an_adaptive_campaign(
    starter_suite, alice, team_a, monkeypatch, capsys
):
    from apps.campaigns import services
    from apps.campaigns.models import Campaign

    alice.is_superuser = True
    alice.save(update_fields=["is_superuser"])
    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)
    call_command(
        "run_campaign", "--agent", "sim:family-ace", "--repeat", "10", "--adaptive", "--budget-share", "0.2"
    )
    campaign = Campaign.objects.get()
    assert campaign.adaptive is True
    assert campaign.adaptive_options["budget_share"] == 0.2
    assert campaign.name == "sim:family-ace (simulated persona, not a model) × starter (adaptive, N=10)"
    assert f"campaign {campaign.pk} started (adaptive)" in capsys.readouterr().out


def test_run_campaign_adaptive_options_need_adaptive(starter_suite, alice):
    alice.is_superuser = True
    alice.save(update_fields=["is_superuser"])
    with pytest.raises(CommandError, match="--calibration, --budget-share and --target-se need --adaptive"):
        call_command("run_campaign", "--agent", "sim:family-ace", "--budget-share", "0.2")


def test_calibrate_suite_command_reports_the_fit(family_campaigns, team_a, capsys):
    call_command("calibrate_suite", "--suite", "starter", "--team", team_a.name, "--no-validate")
    out = capsys.readouterr().out
    assert out.startswith("calibration ")
    assert ": starter v1 on 5 campaigns, 15 tasks, " in out
