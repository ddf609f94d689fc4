"""Agent and price-sheet services: find-or-create by spec, the in-use rule, prices the engine validates."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from apps.agents.models import AgentConfig, PriceSheet
from apps.agents.services import (
    AgentInUse,
    UnknownAgent,
    agent_config_for,
    agent_config_imported,
    agent_config_update,
    price_sheet_create,
    price_sheet_default,
    price_sheet_load_starter,
)
from tb_engine.pricing import PriceSheetError, cost_of
from tb_engine.transcript import Usage

pytestmark = pytest.mark.django_db


def test_agent_config_for_creates_golden_and_personas_once():
    first = agent_config_for("golden")
    again = agent_config_for("golden")
    steady = agent_config_for("sim:steady")

    assert first.pk == again.pk
    assert (steady.kind, steady.persona, steady.model, steady.engine_spec, steady.is_simulation) == (
        "sim",
        "steady",
        "sim-steady",
        "sim:steady",
        True,
    )
    assert AgentConfig.objects.count() == 2


def test_agent_config_for_finds_by_name_and_rejects_unknown_specs():
    named = AgentConfig.objects.create(name="gpt endpoint", kind="openai", model="gpt-4.1-mini")

    assert agent_config_for("gpt endpoint") == named
    with pytest.raises(UnknownAgent) as persona:
        agent_config_for("sim:genius")
    with pytest.raises(UnknownAgent) as other:
        agent_config_for("gpt-9")
    assert str(persona.value).startswith("unknown simulated persona 'genius'; known: ")
    assert (
        str(other.value)
        == "unknown agent 'gpt-9': use golden, sim:<persona>, check:<kind> or an AgentConfig name"
    )
    assert AgentConfig.objects.count() == 1


def test_imported_agent_is_created_once_and_never_changed():
    first = agent_config_imported(name="tb:a", model="a", parameters={"imported": "thinkingbox"})
    second = agent_config_imported(name="tb:a", model="other", parameters={})

    assert second.pk == first.pk
    assert (second.kind, second.model, second.parameters, second.is_simulation) == (
        "openai",
        "a",
        {"imported": "thinkingbox"},
        False,
    )


def test_agent_update_refuses_behaviour_changes_once_a_campaign_uses_it(make_campaign):
    agent = AgentConfig.objects.create(name="careless", kind="sim", persona="careless")
    assert agent_config_update(agent=agent, changes={"persona": "steady"}).persona == "steady"
    make_campaign(agent, tasks=1, n=1)

    with pytest.raises(AgentInUse) as refused:
        agent_config_update(agent=agent, changes={"persona": "careless", "max_concurrency": 2})
    renamed = agent_config_update(agent=agent, changes={"name": "steady v1", "persona": "steady"})

    assert str(refused.value) == (
        "agent 'careless' is used by campaigns; persona cannot change (create a new agent configuration instead)"
    )
    agent.refresh_from_db()
    assert (renamed.name, agent.name, agent.persona, agent.max_concurrency) == (
        "steady v1",
        "steady v1",
        "steady",
        256,  # the default, unchanged
    )


def test_price_sheet_create_stores_prices_the_engine_reads_back():
    sheet = price_sheet_create(
        name="March",
        source="vendor page",
        effective_date=date(2025, 3, 1),
        models={"m": {"input": "0.4", "output": "1.6"}},
    )

    assert sheet.prices == {"m": {"input": "0.4", "output": "1.6"}}
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000)
    assert cost_of(usage, "m", sheet.as_price_list()) == Decimal("1.2")


def test_price_sheet_create_rejects_a_bad_price_and_stores_nothing():
    with pytest.raises(PriceSheetError) as bad:
        price_sheet_create(
            name="bad", source="x", effective_date=date(2025, 3, 1), models={"m": {"input": "-1"}}
        )

    assert "m" in str(bad.value)
    assert PriceSheet.objects.count() == 0


def test_price_sheet_default_loads_the_starter_sheet_once_then_prefers_the_newest():
    starter = price_sheet_default()
    assert price_sheet_default() == starter == price_sheet_load_starter()
    newer = PriceSheet.objects.create(
        name="newer", source="x", effective_date=date(starter.effective_date.year + 1, 1, 1), prices={}
    )

    assert price_sheet_default() == newer
    assert PriceSheet.objects.count() == 2
