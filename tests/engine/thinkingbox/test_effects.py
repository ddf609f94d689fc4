"""Real __reserved__geteffects answers -> our snapshots and classified diff, beside their hash verdict.

The unstable fields come from the real servers' own declarations (read with the servers'
interpreter, tests/support/real_servers.py), never from a table kept here.
"""

from __future__ import annotations

import json
import random

import pytest

from tb_engine.thinkingbox.declarations import ServerDeclarations, server_declarations
from tb_engine.thinkingbox.effects import (
    compare_effects,
    effects_states,
    infer_table_specs,
    snapshot_of,
    snapshots_of,
    state_writes,
)
from tb_engine.thinkingbox.errors import ThinkingBoxFormatError
from tests.support.paths import THINKINGBOX_DIR
from tests.support.real_servers import SERVER_ENV, server_module, servers_python

EFFECTS = THINKINGBOX_DIR / "effects"

pytestmark = pytest.mark.skipif(not EFFECTS.exists(), reason="ThinkingBox reference material not present")

_declared: dict[str, ServerDeclarations] = {}


def _declarations(server: str) -> ServerDeclarations:
    if server not in _declared:
        _declared[server] = server_declarations(servers_python(), server_module(server), env=SERVER_ENV)
    return _declared[server]


def _load(server: str, task: str, case: str) -> tuple[str, dict]:
    data = json.loads((EFFECTS / f"effects_{server}_{task}_{case}.json").read_text())
    return data["_meta"]["server"], data["geteffects"]


def _compare(server: str, task: str, case: str):
    name, answer = _load(server, task, case)
    return compare_effects(name, answer, _declarations(name))


def _items(server: str, task: str, case: str) -> list[tuple]:
    return [(i.kind, i.table, i.key, i.field) for i in _compare(server, task, case).diff]


RETAIL = ("sandbox_external_retail", "test_case_ST002_001")
BOOKING = ("external_booking_v1", "test_bmd_001")


@pytest.mark.parametrize("server,task", [RETAIL, BOOKING])
def test_compare_effects_golden_has_no_diff_and_passes(server, task):
    comparison = _compare(server, task, "golden")
    assert comparison.diff == []
    assert (comparison.our_pass, comparison.hash_pass, comparison.agree) == (True, True, True)


@pytest.mark.parametrize("server,task", [RETAIL, BOOKING])
def test_compare_effects_unstable_text_change_still_passes(server, task):
    comparison = _compare(server, task, "change_unstable_text")
    assert comparison.diff == []
    assert comparison.hash_pass is True


@pytest.mark.parametrize("server,task", [RETAIL, BOOKING])
def test_compare_effects_without_declarations_disagrees_on_unstable_text(server, task):
    # The subject is free text the server does not hash: without its declarations our diff
    # flags it, and the comparison says the two verdicts disagree (never hidden).
    comparison = compare_effects(*_load(server, task, "change_unstable_text"))
    assert (comparison.our_pass, comparison.hash_pass, comparison.agree) == (False, True, False)
    assert comparison.declarations_verified is False


def test_compare_effects_change_arg_is_one_wrong_value():
    assert _items(*RETAIL, "change_arg") == [("wrong_value", "zendesk_tickets", "6", "status")]
    assert _items(*BOOKING, "change_arg") == [("wrong_value", "zendesk_tickets", "13", "refund_amount")]


def test_compare_effects_extra_call_is_one_extra_row_not_positional_noise():
    comparison = _compare(*BOOKING, "extra_call")
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
    # The servers hash a ticket's updated_at (their declarations leave it stable), so it counts too.
    assert _items(*RETAIL, "skip_last") == [
        ("wrong_value", "zendesk_tickets", "6", "status"),
        ("wrong_value", "zendesk_tickets", "6", "updated_at"),
    ]
    assert _items(*BOOKING, "skip_last") == [
        ("wrong_value", "zendesk_tickets", "13", "status"),
        ("wrong_value", "zendesk_tickets", "13", "tags"),
        ("wrong_value", "zendesk_tickets", "13", "updated_at"),
        ("wrong_value", "zendesk_tickets", "13", "escalation_reason"),
    ]


def test_compare_effects_verdicts_agree_and_hashes_recompute_on_every_real_file():
    checked = []
    for path in sorted(EFFECTS.glob("*.json")):
        data = json.loads(path.read_text())
        server = data["_meta"]["server"]
        comparison = compare_effects(server, data["geteffects"], _declarations(server))
        checked.append((path.name, comparison.agree, comparison.declarations_verified))
        assert (path.name, comparison.hash_pass) == (path.name, data["_meta"]["pass_hash_equal"])
    assert checked == [(name, True, True) for name, _, _ in checked]
    assert len(checked) == 12


def test_infer_table_specs_keys_and_unstable_fields_from_the_server_declarations():
    server, answer = _load(*RETAIL, "golden")
    specs = effects_states(server, answer, _declarations(server)).specs
    assert specs["zendesk_tickets"].primary_key == ("id",)
    # What the server's Ticket model marks UnstableField: the clock stamps are hashed.
    assert specs["zendesk_tickets"].unstable == frozenset({"subject", "description"})
    assert specs["zendesk_users"].unstable == frozenset({"created_at", "updated_at"})
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


@pytest.mark.parametrize("case", ["golden", "change_arg"])
def test_compare_effects_reuses_snapshots_built_under_the_same_specs(case, monkeypatch):
    server, answer = _load(*RETAIL, case)
    declarations = _declarations(server)
    states = effects_states(server, answer, declarations)
    built = snapshots_of(states)
    expected = [(i.kind, i.table, i.key, i.field) for i in compare_effects(server, answer, declarations).diff]

    def no_second_build(*_args, **_kwargs):
        raise AssertionError("the snapshots were built again")

    with monkeypatch.context() as patch:
        patch.setattr("tb_engine.thinkingbox.effects.snapshots_of", no_second_build)
        reused = compare_effects(server, answer, declarations, built=built)
    assert [(i.kind, i.table, i.key, i.field) for i in reused.diff] == expected


def test_compare_effects_builds_its_own_snapshots_when_the_given_specs_differ():
    server, answer = _load(*RETAIL, "change_arg")
    declarations = _declarations(server)
    states = effects_states(server, answer, declarations)
    expected = compare_effects(server, answer, declarations)
    changed = {item.table for item in expected.diff}
    # Snapshots of the tables the change did not touch only: used by mistake, they would show no diff.
    untouched = {name: spec for name, spec in states.specs.items() if name not in changed}
    partial = {
        key: snapshot_of(rows, untouched)
        for key, rows in (("initial", states.initial), ("result", states.result), ("golden", states.golden))
    }

    compared = compare_effects(server, answer, declarations, built=partial)

    assert expected.diff != []
    assert [(i.kind, i.table, i.key) for i in compared.diff] == [
        (i.kind, i.table, i.key) for i in expected.diff
    ]
