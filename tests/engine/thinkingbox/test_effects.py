"""Real __reserved__geteffects answers -> our snapshots and classified diff, beside their hash verdict."""

from __future__ import annotations

import json
import random

import pytest

from tb_engine.thinkingbox.effects import (
    compare_effects,
    effects_states,
    infer_table_specs,
    snapshots_of,
    state_writes,
)
from tb_engine.thinkingbox.errors import ThinkingBoxFormatError
from tests.support.paths import THINKINGBOX_DIR

EFFECTS = THINKINGBOX_DIR / "effects"

pytestmark = pytest.mark.skipif(not EFFECTS.exists(), reason="ThinkingBox reference material not present")


def _load(server: str, task: str, case: str) -> tuple[str, dict]:
    data = json.loads((EFFECTS / f"effects_{server}_{task}_{case}.json").read_text())
    return data["_meta"]["server"], data["geteffects"]


def _items(server: str, task: str, case: str) -> list[tuple]:
    comparison = compare_effects(*_load(server, task, case))
    return [(i.kind, i.table, i.key, i.field) for i in comparison.diff]


RETAIL = ("sandbox_external_retail", "test_case_ST002_001")
BOOKING = ("external_booking_v1", "test_bmd_001")


@pytest.mark.parametrize("server,task", [RETAIL, BOOKING])
def test_compare_effects_golden_has_no_diff_and_passes(server, task):
    comparison = compare_effects(*_load(server, task, "golden"))
    assert comparison.diff == []
    assert (comparison.our_pass, comparison.hash_pass, comparison.agree) == (True, True, True)


@pytest.mark.parametrize("server,task", [RETAIL, BOOKING])
def test_compare_effects_unstable_text_change_still_passes(server, task):
    comparison = compare_effects(*_load(server, task, "change_unstable_text"))
    assert comparison.diff == []
    assert comparison.hash_pass is True


def test_compare_effects_change_arg_is_one_wrong_value():
    assert _items(*RETAIL, "change_arg") == [("wrong_value", "zendesk_tickets", "6", "status")]
    assert _items(*BOOKING, "change_arg") == [("wrong_value", "zendesk_tickets", "13", "refund_amount")]


def test_compare_effects_extra_call_is_one_extra_row_not_positional_noise():
    server, answer = _load(*BOOKING, "extra_call")
    comparison = compare_effects(server, answer)
    assert len(comparison.raw_diff) == 248  # ThinkingBox's positional diff, kept as evidence
    assert [(i.kind, i.table, i.key, i.field) for i in comparison.diff] == [
        ("extra_effect", "zendesk_tickets", "14", None)
    ]
    assert comparison.hash_pass is False
    assert _items(*RETAIL, "extra_call") == [("extra_effect", "zendesk_tickets", "7", None)]
    assert _items(*BOOKING, "extra_call_domain") == [
        ("extra_effect", "zendesk_tickets", "ZDSK-00000002", None)
    ]


def test_compare_effects_skipped_row_creation_is_missing_effect():
    assert _items(*BOOKING, "skip_last_domain") == [
        ("missing_effect", "zendesk_tickets", "ZDSK-00000001", None)
    ]


def test_compare_effects_skipped_update_of_created_row_is_wrong_value_under_spec():
    # The row did not exist in S0, so both runs changed its cells (SPEC §3): wrong value, not missing.
    assert _items(*RETAIL, "skip_last") == [("wrong_value", "zendesk_tickets", "6", "status")]
    assert _items(*BOOKING, "skip_last") == [
        ("wrong_value", "zendesk_tickets", "13", "status"),
        ("wrong_value", "zendesk_tickets", "13", "tags"),
        ("wrong_value", "zendesk_tickets", "13", "escalation_reason"),
    ]


def test_compare_effects_verdicts_agree_on_every_real_file():
    for path in sorted(EFFECTS.glob("*.json")):
        data = json.loads(path.read_text())
        comparison = compare_effects(data["_meta"]["server"], data["geteffects"])
        assert (path.name, comparison.agree) == (path.name, True)
        assert (path.name, comparison.hash_pass) == (path.name, data["_meta"]["pass_hash_equal"])


def test_infer_table_specs_keys_and_unstable_fields():
    server, answer = _load(*RETAIL, "golden")
    specs = effects_states(server, answer).specs
    assert specs["zendesk_tickets"].primary_key == ("id",)
    assert specs["zendesk_tickets"].unstable == frozenset(
        {"subject", "description", "created_at", "updated_at"}
    )
    assert specs["external_retail_toolset_netsuite_models_inventory_records"].primary_key == ("sku",)
    assert specs["external_retail_toolset_oms_models_carrier_tracking"].primary_key == ("tracking_number",)


def test_snapshots_of_are_independent_of_row_order():
    server, answer = _load(*BOOKING, "golden")
    shuffled = json.loads(json.dumps(answer))
    for rows in shuffled["result_db_state"].values():
        random.Random(7).shuffle(rows)
    first = snapshots_of(effects_states(server, answer))["result"]
    second = snapshots_of(effects_states(server, shuffled))["result"]
    assert first == second


def test_state_writes_names_changed_cells_and_new_rows():
    server, answer = _load(*RETAIL, "extra_call")
    states = effects_states(server, answer)
    written = state_writes(states.initial, states.result, states.specs)
    assert sorted(w for w in written if w[0] == "zendesk_tickets") == [
        ("zendesk_tickets", "6", None),
        ("zendesk_tickets", "7", None),
    ]


def test_effects_states_rejects_missing_state():
    server, answer = _load(*RETAIL, "golden")
    del answer["golden_db_state"]
    with pytest.raises(ThinkingBoxFormatError) as caught:
        effects_states(server, answer)
    assert (
        caught.value.message
        == "geteffects answer for 'sandbox_external_retail' has no golden_db_state mapping"
    )


def test_infer_table_specs_without_id_uses_whole_row_key():
    specs = infer_table_specs(
        "any", [{"tags": [{"name": "a", "n": 1}, {"name": "a", "n": 2}, {"name": "b", "n": 1}]}]
    )
    assert specs["tags"].primary_key == ("name", "n")
