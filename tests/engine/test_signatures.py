"""Failure signatures (SPEC §8): unit cases and hypothesis properties over hand-built stored results."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tb_engine.grading import evaluate_checks
from tb_engine.signatures import (
    ROW,
    Element,
    Signature,
    check_target,
    digest_of,
    neighbour_digests,
    noun,
    related,
    signature_from_parts,
    signature_of_result,
)
from tb_engine.snapshot import Snapshot
from tb_engine.spec import CheckSpec, TableSpec

CALLS = [
    {"index": 0, "id": "c0", "name": "find_ticket", "arguments": {}},
    {"index": 1, "id": "c1", "name": "update_ticket", "arguments": {}},
    {"index": 2, "id": "c2", "name": "create_refund", "arguments": {}},
]


def item(kind, table, key, field, initial, result, golden, written_by=()):
    return {
        "kind": kind,
        "table": table,
        "key": key,
        "field": field,
        "initial": initial,
        "result": result,
        "golden": golden,
        "written_by": list(written_by),
    }


def stored(diff=(), checks=(), rubrics=(), categories=None, verdict="fail", calls=CALLS):
    if categories is None:
        categories = sorted({d["kind"] for d in diff})
    return {
        "task_id": "helpdesk/refund",
        "task_hash": "h",
        "status": "done",
        "verdict": verdict,
        "diff": list(diff),
        "checks": list(checks),
        "rubrics": list(rubrics),
        "categories": categories,
        "transcript": {"tool_calls": list(calls)},
    }


def test_signature_reduces_items_to_class_table_field_tool_and_drops_row_keys():
    left_open = item("missing_effect", "tickets", "20", "status", "open", "open", "hold")
    no_refund = item("missing_effect", "refunds", "R-9", None, None, None, {"id": "R-9", "amount": 20.0})
    signature = signature_of_result(stored([left_open, no_refund]))
    assert signature.elements == (
        Element("missing_effect", "refunds", ROW, "-"),
        Element("missing_effect", "tickets", "status", "-"),
    )
    assert (
        signature.describe()
        == "no refund where golden creates one; left ticket status open where golden has hold"
    )
    assert signature.describe(with_values=False) == (
        "no refund where golden creates one; left ticket status unchanged where golden changes it"
    )


def test_same_mistake_on_another_row_is_the_same_signature():
    on_20 = stored([item("wrong_value", "tickets", "20", "status", "open", "solved", "hold", [1])])
    on_31 = stored([item("wrong_value", "tickets", "31", "status", "new", "closed", "hold", [1])])
    a, b = signature_of_result(on_20), signature_of_result(on_31)
    assert a.digest == b.digest
    assert a.elements == (Element("wrong_value", "tickets", "status", "update_ticket"),)
    assert a.phrases == ("set ticket status to solved via update_ticket where golden has hold",)
    assert b.phrases == ("set ticket status to closed via update_ticket where golden has hold",)
    assert a.generic == b.generic == ("set ticket status via update_ticket to a value other than golden's",)


def test_the_writing_tool_is_part_of_the_signature():
    by_update = stored([item("extra_effect", "tickets", "20", "priority", "low", "high", "low", [1])])
    by_refund = stored([item("extra_effect", "tickets", "20", "priority", "low", "high", "low", [2])])
    unwritten = stored([item("extra_effect", "tickets", "20", "priority", "low", "high", "low", [])])
    digests = {signature_of_result(r).digest for r in (by_update, by_refund, unwritten)}
    assert len(digests) == 3
    both = stored([item("extra_effect", "tickets", "20", "priority", "low", "high", "low", [2, 1, 1])])
    assert signature_of_result(both).elements[0].tool == "create_refund+update_ticket"


def test_failed_checks_and_rubrics_join_the_signature_passed_ones_do_not():
    checks = [
        {
            "kind": "row_equals",
            "description": "ticket TKT-1 resolved",
            "passed": False,
            "target": "tickets.status",
        },
        {"kind": "no_new_rows", "description": "no refunds", "passed": True, "target": "refunds"},
    ]
    rubrics = [
        {"question": "Did the reply apologise?", "answer": False},
        {"question": "Did it name the order?", "answer": True},
        {"question": "Was it polite?", "answer": None},
    ]
    signature = signature_of_result(
        stored(checks=checks, rubrics=rubrics, categories=["check_failed", "rubric_failed"])
    )
    assert signature.elements == (
        Element("check_failed", "row_equals", "tickets.status"),
        Element("rubric_failed", "", "Did the reply apologise?"),
        Element("rubric_unjudged", "", "Was it polite?"),
    )
    assert signature.phrases == (
        "failed check: ticket TKT-1 resolved",
        "rubric not met: Did the reply apologise?",
        "rubric not judged: Was it polite?",
    )


def test_passing_and_unfinished_attempts_have_no_signature():
    assert signature_of_result(stored(verdict="pass")) is None
    assert signature_of_result({**stored(), "status": "infra_error", "verdict": None}) is None


def test_categories_without_details_still_count():
    # An imported row whose server says a rubric failed, without the rubric itself.
    signature = signature_of_result(stored(categories=["rubric_failed"]))
    assert signature.elements == (Element("rubric_failed", "", "(unnamed)"),)
    assert signature_of_result(stored()).elements == ()
    assert signature_of_result(stored()).describe().startswith("no recorded state difference")


def test_stored_check_results_without_a_target_use_the_task_checks_by_position():
    checks = [
        {"kind": "row_equals", "description": "row_equals(fields=…, key={'id': 'TKT-1'})", "passed": False}
    ]
    signature = signature_from_parts(
        diff=[],
        checks=checks,
        rubrics=[],
        categories=["check_failed"],
        tools=[],
        check_targets=["tickets.status"],
    )
    assert signature.elements == (Element("check_failed", "row_equals", "tickets.status"),)


def test_check_target_names_table_and_fields_without_keys():
    assert check_target(
        "row_equals", {"table": "tickets", "key": {"id": "T-1"}, "fields": {"status": 1, "a": 2}}
    ) == ("tickets.a,status")
    assert check_target("row_count", {"table": "grants", "where": {"employee_id": "E", "status": "x"}}) == (
        "grants[employee_id,status]"
    )
    assert check_target("unchanged", {"table": "requests", "except": [{"id": "AR-1"}]}) == "requests"
    assert check_target("custom_unsupported", {}, "needs a human") == "needs a human"


def test_grading_records_the_check_target():
    spec = TableSpec("tickets", {"id": "text", "status": "text"}, ("id",))
    state = Snapshot.from_rows({"tickets": [{"id": "T-1", "status": "open"}]}, {"tickets": spec})
    check = CheckSpec("row_equals", {"table": "tickets", "key": {"id": "T-1"}, "fields": {"status": "hold"}})
    [result] = evaluate_checks([check], state, state)
    assert (result.passed, result.target) == (False, "tickets.status")


def test_row_phrases_say_what_happened_to_the_row():
    def phrase(kind, initial, result, golden):
        return signature_of_result(
            stored([item(kind, "refunds", "R", None, initial, result, golden, [2])])
        ).phrases[0]

    row = {"id": "R"}
    assert phrase("extra_effect", None, row, None) == "created an extra refund via create_refund"
    assert phrase("extra_effect", row, None, row) == "deleted a refund golden keeps via create_refund"
    assert phrase("missing_effect", row, row, None) == "kept the refund golden deletes via create_refund"
    assert (
        phrase("wrong_value", row, None, {"id": "R", "x": 1})
        == "deleted the refund golden changes via create_refund"
    )


def test_nouns_are_singular():
    assert [noun(t) for t in ("tickets", "access_grants", "policies", "addresses", "status", "boxes")] == [
        "ticket",
        "access grant",
        "policy",
        "address",
        "status",
        "box",
    ]


def test_related_means_exactly_one_element_apart():
    a, b, c = (
        Element("wrong_value", "t", "f"),
        Element("extra_effect", "t", ROW),
        Element("check_failed", "k", "t"),
    )
    assert related([a], [a, b]) is True
    assert related([a, b], [a]) is True
    assert related([a], [b]) is False  # two elements apart: one left out, one added
    assert related([a, b], [a, b]) is False
    assert related([a, b, c], [a, c]) is True
    assert digest_of([a]) in neighbour_digests([a, b])
    assert neighbour_digests([]) == []


def test_stored_items_round_trip():
    signature = signature_of_result(
        stored([item("wrong_value", "tickets", "20", "status", "open", "x", "hold", [1])])
    )
    again = Signature.from_items(signature.items())
    assert again == signature
    assert again.digest == signature.digest


# --- Properties ----------------------------------------------------------------------------------

kinds = st.sampled_from(("wrong_value", "missing_effect", "extra_effect"))
tables = st.sampled_from(("tickets", "refunds", "orders"))
fields = st.one_of(st.none(), st.sampled_from(("status", "amount", "note")))
values = st.one_of(st.none(), st.text(max_size=5), st.integers(-3, 3))
items = st.lists(
    st.builds(
        lambda kind, table, key, field, i, r, g, w: item(kind, table, key, field, i, r, g, w),
        kinds,
        tables,
        st.text(min_size=1, max_size=4),
        fields,
        values,
        values,
        values,
        st.lists(st.integers(0, 2), max_size=3),
    ),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(items, st.randoms(use_true_random=False))
def test_signature_ignores_item_order_and_row_keys(diff, rnd):
    shuffled = list(diff)
    rnd.shuffle(shuffled)
    rekeyed = [{**d, "key": f"other-{rnd.randint(0, 10**6)}"} for d in shuffled]
    base = signature_of_result(stored(diff))
    assert signature_of_result(stored(shuffled)) == base
    assert signature_of_result(stored(rekeyed)).elements == base.elements
    assert signature_of_result(stored(rekeyed)).digest == base.digest


@settings(max_examples=200, deadline=None)
@given(items, items)
def test_equal_digests_iff_equal_element_sets(one, two):
    a, b = signature_of_result(stored(one)), signature_of_result(stored(two))
    assert (a.digest == b.digest) == (set(a.elements) == set(b.elements))
    assert a.elements == tuple(sorted(set(a.elements)))


@settings(max_examples=200, deadline=None)
@given(items, items)
def test_related_iff_one_lists_the_other_among_its_neighbours(one, two):
    a, b = signature_of_result(stored(one)), signature_of_result(stored(two))
    linked = a.digest in neighbour_digests(b.elements) or b.digest in neighbour_digests(a.elements)
    assert related(a.elements, b.elements) == linked


def test_digest_is_stable_across_processes():
    # A fixed value: a change here changes every stored signature (bump SIGNATURE_VERSION and backfill).
    element = Element("wrong_value", "tickets", "status", "update_ticket")
    assert digest_of([element]) == "b55410f6517ed063a8099f020061befd"
    assert digest_of([element, element]) == digest_of([element])
    assert digest_of([]) != digest_of([element])
