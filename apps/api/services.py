"""Writes the API performs that no other app offers yet: agent configs and price sheets.

Keyword-only; each docstring lists the side effects. Validation of shape lives in the views'
input serializers; the rules that protect stored results live here, so any caller gets them.
"""

from __future__ import annotations

from datetime import date

from django.db import transaction

from apps.campaigns.models import AgentConfig, PriceSheet
from tb_engine.pricing import PriceList

# Changing these would silently change what past campaigns of the agent mean.
BEHAVIOUR_FIELDS = ("kind", "persona", "model", "base_url", "parameters")


class AgentInUse(Exception):
    """A behaviour field of an agent that campaigns already use cannot change."""


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
