"""Find-or-create helpers used by commands and the demo (agent configs, team, price sheet)."""

from __future__ import annotations

from django.core.management.base import CommandError

from apps.campaigns.models import AgentConfig, PriceSheet
from apps.core.models import Team


def agent_config_for(spec: str) -> AgentConfig:
    """'golden', 'sim:<persona>' (created on first use) or the name of an existing AgentConfig."""
    if spec == "golden":
        agent, _ = AgentConfig.objects.get_or_create(
            name="golden (harness self-check)",
            defaults={"kind": AgentConfig.Kind.GOLDEN, "max_concurrency": 64},
        )
        return agent
    if spec.startswith("sim:"):
        from tb_engine.agents.simulated import PERSONAS

        persona = spec.split(":", 1)[1]
        if persona not in PERSONAS:
            raise CommandError(f"unknown simulated persona {persona!r}; known: {', '.join(sorted(PERSONAS))}")
        agent, _ = AgentConfig.objects.get_or_create(
            name=f"sim:{persona} (simulated persona, not a model)",
            defaults={
                "kind": AgentConfig.Kind.SIMULATED,
                "persona": persona,
                "model": f"sim-{persona}",
                "max_concurrency": 64,
            },
        )
        return agent
    try:
        return AgentConfig.objects.get(name=spec)
    except AgentConfig.DoesNotExist:
        raise CommandError(
            f"unknown agent {spec!r}: use golden, sim:<persona> or an AgentConfig name"
        ) from None


def default_team(owner) -> Team:
    team = Team.objects.filter(members=owner).order_by("pk").first()
    if team is None:
        team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": "Demo team"})
        team.members.add(owner)
    return team


def default_price_sheet() -> PriceSheet | None:
    """The most recent price sheet, loading the engine's dated starter sheet on first use."""
    sheet = PriceSheet.objects.order_by("-effective_date", "-pk").first()
    if sheet is not None:
        return sheet
    from apps.campaigns.pricing import price_sheet_load_starter

    return price_sheet_load_starter()
