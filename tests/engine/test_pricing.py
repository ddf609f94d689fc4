"""Price sheets and cost_of."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from tb_engine.pricing import (
    PriceList,
    PriceSheetError,
    attempt_cost,
    cost_of,
    load_price_sheet,
    load_starter_price_sheet,
)
from tb_engine.transcript import Transcript, Usage

SHEET = PriceList.from_dict(
    {
        "name": "test",
        "source": "hand-written for tests",
        "effective_date": "2025-01-01",
        "models": {
            "reasoner": {
                "input": 2,
                "cached_input": 0.5,
                "output": 8,
                "reasoning": 10,
                "aliases": ["reasoner-2025"],
            },
            "plain": {"input": "1.5", "output": 6},
        },
    }
)


def test_cost_of_prices_input_cached_output_and_reasoning_separately():
    usage = Usage(
        input_tokens=1_000_000,
        cached_input_tokens=400_000,
        output_tokens=200_000,
        reasoning_tokens=50_000,
        calls=3,
    )
    # (600k*2 + 400k*0.5 + 150k*8 + 50k*10) / 1M = 1.2 + 0.2 + 1.2 + 0.5
    assert cost_of(usage, "reasoner", SHEET) == Decimal("3.1")


def test_cost_of_defaults_cached_to_input_and_reasoning_to_output_price():
    usage = Usage(
        input_tokens=2_000, cached_input_tokens=1_000, output_tokens=1_000, reasoning_tokens=500, calls=1
    )
    assert cost_of(usage, "plain", SHEET) == Decimal("0.009")


def test_cost_of_unpriced_model_is_none_not_zero():
    assert cost_of(Usage(input_tokens=10, output_tokens=10, calls=1), "mystery-model", SHEET) is None


def test_cost_of_matches_aliases_case_insensitively():
    usage = Usage(input_tokens=1_000_000, calls=1)
    assert cost_of(usage, "Reasoner-2025", SHEET) == Decimal("2")


def test_cost_of_no_usage_on_priced_model_is_zero():
    assert cost_of(Usage(), "plain", SHEET) == Decimal("0")


def test_starter_sheet_loads_with_source_and_date():
    sheet = load_starter_price_sheet()
    assert sheet.effective_date == date(2025, 10, 15)
    assert "must be checked" in sheet.source
    assert {
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "gpt-4.1-mini",
        "o3",
        "o4-mini",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
    } <= set(sheet.models)
    assert cost_of(
        Usage(input_tokens=1_000_000, output_tokens=1_000_000, calls=1), "gpt-4o-mini", sheet
    ) == Decimal("0.75")


def test_price_sheet_round_trips_through_to_dict():
    assert PriceList.from_dict(SHEET.to_dict()) == SHEET


def test_price_sheet_errors_name_the_file_and_field(tmp_path):
    path = tmp_path / "sheet.yaml"
    path.write_text("name: x\nsource: y\neffective_date: 2025-01-01\nmodels:\n  m1: {input: 1, output: -2}\n")
    with pytest.raises(PriceSheetError) as negative:
        load_price_sheet(path)
    path.write_text("name: x\nsource: y\neffective_date: 2025-01-01\nmodels:\n  m1: {input: 1}\n")
    with pytest.raises(PriceSheetError) as missing:
        load_price_sheet(path)
    path.write_text("name: x\nsource: y\neffective_date: soon\nmodels: {m1: {input: 1, output: 1}}\n")
    with pytest.raises(PriceSheetError) as bad_date:
        load_price_sheet(path)
    assert str(negative.value) == f"{path}: models.m1.output: must be a finite number >= 0, got -2"
    assert str(missing.value) == f"{path}: models.m1.output: missing"
    assert str(bad_date.value) == f"{path}: effective_date: not an ISO date ('soon')"


def test_attempt_cost_splits_agent_from_evaluation_overhead():
    transcript = Transcript(
        agent_usage=Usage(input_tokens=1_000_000, output_tokens=100_000, calls=4),
        user_usage=Usage(input_tokens=200_000, output_tokens=10_000, calls=2),
        judge_usage=Usage(),
    )
    cost = attempt_cost(
        transcript, agent_model="plain", user_model="reasoner", judge_model="mystery", sheet=SHEET
    )
    # agent 1.5 + 0.6; user 0.4 + 0.08; the judge made no call, so its unknown model costs nothing
    assert (cost.agent, cost.user, cost.judge, cost.overhead) == (
        Decimal("2.1"),
        Decimal("0.48"),
        Decimal(0),
        Decimal("0.48"),
    )


def test_attempt_cost_overhead_is_unpriced_when_a_role_model_is_unpriced():
    transcript = Transcript(
        user_usage=Usage(input_tokens=10, calls=1), judge_usage=Usage(input_tokens=10, calls=1)
    )
    cost = attempt_cost(
        transcript, agent_model="plain", user_model="plain", judge_model="mystery", sheet=SHEET
    )
    assert (cost.agent, cost.judge, cost.overhead) == (Decimal(0), None, None)
