"""Writes for agent configurations and price sheets. Keyword-only; each docstring lists the side effects.

Validation of shape lives in the API's input serializers; the rules that protect stored results
live here, so every caller (API, commands, demo, imports) gets them.
"""

from __future__ import annotations

from datetime import date

from django.db import transaction

from apps.agents.models import AgentConfig, PriceSheet
from tb_engine.agents.harness_checks import CHECKS, LABELS
from tb_engine.agents.simulated import PERSONAS
from tb_engine.pricing import PriceList, load_starter_price_sheet

# Changing these would silently change what past campaigns of the agent mean.
BEHAVIOUR_FIELDS = ("kind", "persona", "model", "base_url", "parameters")


class AgentInUse(Exception):
    """A behaviour field of an agent that campaigns already use cannot change."""


class UnknownAgent(ValueError):
    """An agent spec that is neither golden, a known sim:<persona> or check:<kind>, nor an AgentConfig name."""


def agent_config_create(
    *,
    name: str,
    kind: str,
    persona: str = "",
    model: str = "",
    base_url: str = "",
    api_key_env: str = "",
    parameters: dict | None = None,
    max_concurrency: int = 16,
) -> AgentConfig:
    """Create an agent configuration. Side effects: one AgentConfig row (credentials only by env-var name)."""
    return AgentConfig.objects.create(
        name=name,
        kind=kind,
        persona=persona,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        parameters=parameters or {},
        max_concurrency=max_concurrency,
    )


@transaction.atomic
def agent_config_update(*, agent: AgentConfig, changes: dict) -> AgentConfig:
    """Apply `changes` to an agent configuration.

    Side effects: updates the AgentConfig row. Raises AgentInUse when a behaviour field
    (kind, persona, model, base_url, parameters) would change while campaigns use the agent:
    their results must keep describing the configuration that produced them.
    """
    locked = AgentConfig.objects.select_for_update().get(pk=agent.pk)
    changed = [
        field for field in BEHAVIOUR_FIELDS if field in changes and changes[field] != getattr(locked, field)
    ]
    if changed and locked.campaigns.exists():
        raise AgentInUse(
            f"agent {locked.name!r} is used by campaigns; {', '.join(changed)} cannot change "
            "(create a new agent configuration instead)"
        )
    for field, value in changes.items():
        setattr(locked, field, value)
    locked.save()
    return locked


def agent_config_for(spec: str) -> AgentConfig:
    """'golden', 'sim:<persona>', 'check:<kind>' (each created on first use) or an existing AgentConfig's name.

    Side effects: at most one AgentConfig row (golden, a simulated persona or a harness check).
    Raises UnknownAgent.
    """
    if spec == "golden":
        agent, _ = AgentConfig.objects.get_or_create(
            name="golden (harness self-check)",
            defaults={"kind": AgentConfig.Kind.GOLDEN, "max_concurrency": 64},
        )
        return agent
    if spec.startswith("sim:"):
        persona = spec.split(":", 1)[1]
        if persona not in PERSONAS:
            raise UnknownAgent(f"unknown simulated persona {persona!r}; known: {', '.join(sorted(PERSONAS))}")
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
    if spec.startswith("check:"):
        kind = spec.split(":", 1)[1]
        if kind not in CHECKS:
            raise UnknownAgent(f"unknown harness check {kind!r}; known: {', '.join(CHECKS)}")
        agent, _ = AgentConfig.objects.get_or_create(
            name=LABELS[kind],
            defaults={"kind": AgentConfig.Kind.CHECK, "persona": kind, "max_concurrency": 64},
        )
        return agent
    try:
        return AgentConfig.objects.get(name=spec)
    except AgentConfig.DoesNotExist:
        raise UnknownAgent(
            f"unknown agent {spec!r}: use golden, sim:<persona>, check:<kind> or an AgentConfig name"
        ) from None


def agent_config_imported(*, name: str, model: str, parameters: dict) -> AgentConfig:
    """The agent that stands for results run elsewhere (e.g. ``tb infer`` rows): found by name or created.

    Side effects: at most one AgentConfig row, of kind openai (not a simulation), with `parameters`
    recording where its results came from. An existing agent of that name is returned unchanged.
    """
    agent, _ = AgentConfig.objects.get_or_create(
        name=name, defaults={"kind": AgentConfig.Kind.OPENAI, "model": model, "parameters": parameters}
    )
    return agent


def price_sheet_create(*, name: str, source: str, effective_date: date, models: dict) -> PriceSheet:
    """Store a price sheet after the engine's own validation. Side effects: one PriceSheet row.

    Raises tb_engine.pricing.PriceSheetError naming the model and field when a price is bad.
    """
    sheet = PriceList.from_dict(
        {"name": name, "source": source, "effective_date": effective_date.isoformat(), "models": models},
        origin="price sheet",
    )
    return PriceSheet.objects.create(
        name=name, source=source, effective_date=effective_date, prices=sheet.to_dict()["models"]
    )


def price_sheet_load_starter() -> PriceSheet:
    """Store the engine's dated starter price sheet (idempotent by name). Side effects: one PriceSheet row."""
    sheet = load_starter_price_sheet()
    data = sheet.to_dict()
    row, _ = PriceSheet.objects.update_or_create(
        name=f"{sheet.name} ({sheet.effective_date})",
        defaults={"source": sheet.source, "effective_date": sheet.effective_date, "prices": data["models"]},
    )
    return row


def price_sheet_default() -> PriceSheet:
    """The most recent price sheet, loading the engine's dated starter sheet on first use.

    Side effects: the starter PriceSheet row when no sheet exists yet.
    """
    sheet = PriceSheet.objects.order_by("-effective_date", "-pk").first()
    if sheet is not None:
        return sheet
    return price_sheet_load_starter()
