"""The classified diff (SPEC §3): unit cases and hypothesis properties over hand-built snapshots."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tb_engine.diff import describe_item, diff_states, effects
from tb_engine.results import DiffItem
from tb_engine.snapshot import Snapshot, stable_columns
from tb_engine.spec import TableSpec

TICKETS = TableSpec(
    "tickets",
    {
        "id": "text",
        "status": "text",
        "amount": "real",
        "tags": "json",
        "vip": "boolean",
        "updated_at": "text",
    },
    ("id",),
    unstable=frozenset({"updated_at"}),
)
REFUNDS = TableSpec(
    "refunds",
    {"id": "text", "order_id": "text", "amount": "real", "method": "text", "created_at": "text"},
    ("id",),
    unstable=frozenset({"created_at"}),
    generated_key=True,
)
SPECS = {"tickets": TICKETS, "refunds": REFUNDS}


def snap(tickets=(), refunds=()) -> Snapshot:
    return Snapshot.from_rows({"tickets": list(tickets), "refunds": list(refunds)}, SPECS)


def ticket(id, status="open", amount=1.0, tags=(), vip=False, updated_at="t0"):
    return {
        "id": id,
        "status": status,
        "amount": amount,
        "tags": list(tags),
        "vip": vip,
        "updated_at": updated_at,
    }


def test_diff_wrong_value_cell_names_three_values_and_writer():
    s0 = snap([ticket("20")])
    sr = snap([ticket("20", status="solved")])
    sg = snap([ticket("20", status="hold")])
    items = diff_states(s0, sr, sg, {("tickets", "20", "status"): (6,)})
    assert items == [DiffItem("wrong_value", "tickets", "20", "status", "open", "solved", "hold", (6,))]
    assert (
        describe_item(items[0])
        == "tickets[20].status: solved (golden: hold) — wrong value, written by call #6"
    )


def test_diff_missing_and_extra_cells_are_classified_against_initial():
    s0 = snap([ticket("1"), ticket("2")])
    sr = snap([ticket("1"), ticket("2", status="solved")])
    sg = snap([ticket("1", status="solved"), ticket("2")])
    kinds = [(i.kind, i.key, i.field) for i in diff_states(s0, sr, sg)]
    assert kinds == [("missing_effect", "1", "status"), ("extra_effect", "2", "status")]


def test_diff_normalises_numbers_booleans_json_lists_and_ignores_unstable_fields():
    s0 = snap([ticket("1")])
    sr = snap([{**ticket("1", amount=2, tags=["b", "a"], vip=1, updated_at="later")}])
    sg = snap([ticket("1", amount=2.0, tags=["a", "b"], vip=True, updated_at="t0")])
    assert diff_states(s0, sr, sg) == []


def test_diff_generated_keys_match_by_content_not_insert_order():
    s0 = snap()
    sr = snap(
        refunds=[
            {"id": "RF-2", "order_id": "A", "amount": 5, "method": "card"},
            {"id": "RF-1", "order_id": "B", "amount": 7, "method": "card"},
        ]
    )
    sg = snap(
        refunds=[
            {"id": "RF-1", "order_id": "A", "amount": 5.0, "method": "card"},
            {"id": "RF-2", "order_id": "B", "amount": 7.0, "method": "card"},
        ]
    )
    assert diff_states(s0, sr, sg) == []


def test_diff_generated_row_with_wrong_amount_is_one_wrong_value():
    s0 = snap()
    sr = snap(refunds=[{"id": "RF-9", "order_id": "A", "amount": 50, "method": "card"}])
    sg = snap(refunds=[{"id": "RF-1", "order_id": "A", "amount": 24.99, "method": "card"}])
    items = diff_states(s0, sr, sg, {("refunds", "RF-9", None): (3,)})
    assert items == [DiffItem("wrong_value", "refunds", "RF-9", "amount", None, 50, 24.99, (3,))]


def test_diff_duplicate_generated_row_is_an_extra_effect():
    row = {"order_id": "A", "amount": 5, "method": "card"}
    s0 = snap()
    sr = snap(refunds=[{"id": "RF-1", **row}, {"id": "RF-2", **row}])
    sg = snap(refunds=[{"id": "RF-1", **row}])
    items = diff_states(s0, sr, sg, {("refunds", "RF-1", None): (1,), ("refunds", "RF-2", None): (2,)})
    assert [(i.kind, i.key, i.field, i.written_by) for i in items] == [("extra_effect", "RF-2", None, (2,))]


def test_diff_deleted_row_is_whole_row_missing_effect():
    s0 = snap([ticket("1")])
    sg = snap([])
    items = diff_states(s0, s0, sg)
    assert [(i.kind, i.field, i.result is not None, i.golden) for i in items] == [
        ("missing_effect", None, True, None)
    ]


def test_effects_list_changes_in_table_order_with_writers():
    s0 = snap([ticket("1")])
    sr = snap(
        [ticket("1", status="solved")], refunds=[{"id": "RF-1", "order_id": "A", "amount": 1, "method": "x"}]
    )
    found = effects(s0, sr, {("tickets", "1", "status"): (0,), ("refunds", "RF-1", None): (1,)})
    assert [(e.op, e.table, e.key, e.field, e.written_by) for e in found] == [
        ("update", "tickets", "1", "status", (0,)),
        ("insert", "refunds", "RF-1", None, (1,)),
    ]


# ---- properties -------------------------------------------------------------------------------

STATUSES = st.sampled_from(["open", "pending", "hold", "solved"])
IDS = [str(i) for i in range(6)]


@st.composite
def ticket_rows(draw, ids):
    return [
        ticket(
            i,
            draw(STATUSES),
            draw(st.sampled_from([1, 1.0, 2.5])),
            draw(st.lists(st.sampled_from("abc"), max_size=3)),
            draw(st.booleans()),
            draw(st.sampled_from(["t0", "t1"])),
        )
        for i in ids
    ]


@st.composite
def mutated(draw, rows):
    out = []
    for row in rows:
        choice = draw(st.sampled_from(["keep", "keep", "change", "delete"]))
        if choice == "keep":
            out.append(dict(row))
        elif choice == "change":
            out.append({**row, "status": draw(STATUSES), "vip": draw(st.booleans()), "updated_at": "t9"})
    for new_id in draw(st.lists(st.sampled_from(["n1", "n2", "n3"]), unique=True, max_size=2)):
        out.append(ticket(new_id, draw(STATUSES)))
    refunds = [
        {
            "id": f"RF-{k}",
            "order_id": draw(st.sampled_from("AB")),
            "amount": draw(st.sampled_from([5, 7.0])),
            "method": "card",
        }
        for k in range(draw(st.integers(0, 3)))
    ]
    return out, refunds


@st.composite
def three_states(draw):
    ids = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=5))
    base = draw(ticket_rows(ids))
    result_rows, result_refunds = draw(mutated(base))
    golden_rows, golden_refunds = draw(mutated(base))
    return (base, []), (result_rows, result_refunds), (golden_rows, golden_refunds)


def _shuffled(rows, seed):
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    return rows


@settings(max_examples=150, deadline=None)
@given(three_states(), st.integers(0, 10_000))
def test_diff_property_shuffled_row_order_gives_same_diff(states, seed):
    plain = [snap(t, r) for t, r in states]
    shuffled = [snap(_shuffled(t, seed), _shuffled(r, seed + 1)) for t, r in states]
    assert diff_states(*plain) == diff_states(*shuffled)


@settings(max_examples=100, deadline=None)
@given(three_states())
def test_diff_property_identical_states_give_no_items(states):
    (t0, r0), _, (tg, rg) = states
    assert diff_states(snap(t0, r0), snap(t0, r0), snap(t0, r0)) == []
    assert diff_states(snap(t0, r0), snap(tg, rg), snap(tg, rg)) == []


def _stable(table: str, row):
    if row is None:
        return None
    return tuple(row[c] for c in stable_columns(SPECS[table]))


@settings(max_examples=200, deadline=None)
@given(three_states())
def test_diff_property_each_item_class_agrees_with_its_three_values(states):
    s0, sr, sg = (snap(t, r) for t, r in states)
    for item in diff_states(s0, sr, sg):
        if item.field is None:
            initial, result, golden = (
                _stable(item.table, v) for v in (item.initial, item.result, item.golden)
            )
        else:
            initial, result, golden = item.initial, item.result, item.golden
        brand_new = item.field is not None and s0.tables[item.table].rows.get(item.key) is None
        result_changed = brand_new or result != initial
        golden_changed = brand_new or golden != initial
        assert result != golden
        expected = {
            (True, True): "wrong_value",
            (False, True): "missing_effect",
            (True, False): "extra_effect",
        }
        assert item.kind == expected[(result_changed, golden_changed)]


@settings(max_examples=100, deadline=None)
@given(three_states())
def test_diff_property_no_items_iff_result_matches_golden_on_stable_content(states):
    s0, sr, sg = (snap(t, r) for t, r in states)
    same_tickets = sr.tables["tickets"].stable == sg.tables["tickets"].stable
    refund_bags = [sorted(map(repr, s.tables["refunds"].stable.values())) for s in (sr, sg)]
    assert (diff_states(s0, sr, sg) == []) == (same_tickets and refund_bags[0] == refund_bags[1])
