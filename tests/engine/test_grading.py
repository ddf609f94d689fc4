"""Explicit checks, rubric judging, verdict, categories and the clean-looking flag."""

from __future__ import annotations

from tb_engine.grading import evaluate_checks, grade, is_clean_looking, judge_rubrics
from tb_engine.judges import KeywordJudge
from tb_engine.results import CheckResult, DiffItem, RubricResult
from tb_engine.snapshot import Snapshot
from tb_engine.spec import CheckSpec, TableSpec
from tb_engine.transcript import ToolCall

TICKETS = TableSpec("tickets", {"id": "text", "status": "text", "note": "text"}, ("id",), frozenset({"note"}))
REFUNDS = TableSpec(
    "refunds", {"id": "text", "order_id": "text", "amount": "real"}, ("id",), generated_key=True
)
SPECS = {"tickets": TICKETS, "refunds": REFUNDS}
S0 = Snapshot.from_rows({"tickets": [{"id": "1", "status": "open"}, {"id": "2", "status": "open"}]}, SPECS)
SR = Snapshot.from_rows(
    {
        "tickets": [
            {"id": "1", "status": "hold", "note": "x"},
            {"id": "2", "status": "open", "note": "changed"},
        ],
        "refunds": [{"id": "R1", "order_id": "A", "amount": 5}],
    },
    SPECS,
)


def _check(kind, **params):
    return CheckSpec(kind, params, description=kind)


def test_checks_each_kind_on_the_result_state():
    results = evaluate_checks(
        [
            _check("row_equals", table="tickets", key={"id": "1"}, fields={"status": "hold"}),
            _check("row_equals", table="tickets", key={"id": "2"}, fields={"status": "solved"}),
            _check("row_count", table="refunds", where={"order_id": "A", "amount": 5.0}, count=1),
            _check("no_new_rows", table="refunds"),
            _check("unchanged", table="tickets", **{"except": [{"id": "1"}]}),
            _check("unchanged", table="tickets"),
        ],
        S0,
        SR,
    )
    assert [(r.passed, r.detail) for r in results] == [
        (True, ""),
        (False, "tickets[2].status = 'open', expected 'solved'"),
        (True, "1 matching refunds row(s), expected 1"),
        (False, "new refunds row(s): R1"),
        (True, ""),
        (False, "tickets row(s) changed: 1"),
    ]


def test_checks_custom_unsupported_always_fails_with_detail():
    (result,) = evaluate_checks(
        [_check("custom_unsupported", detail="python assertion in the original test")], S0, S0
    )
    assert (result.passed, result.detail) == (
        False,
        "unsupported custom check (always fails): python assertion in the original test",
    )


def test_judge_rubrics_keyword_judge_and_missing_judge():
    judge = KeywordJudge({"Mentions the investigation?": ["investigation"]})
    with_judge, _ = judge_rubrics(
        ["Mentions the investigation?", "Polite?"], "The Investigation is open.", judge
    )
    without, _ = judge_rubrics(["Mentions the investigation?"], "The investigation is open.", None)
    # A question without keywords cannot be judged offline: unjudged (None), not a "no".
    assert [r.answer for r in with_judge] == [True, None]
    assert without == [RubricResult("Mentions the investigation?", None, "unjudged: no judge configured")]


def _call(index, read_only=False, error=None):
    return ToolCall(index=index, id=str(index), name="t", arguments={}, read_only=read_only, error=error)


def test_grade_verdict_and_categories_combine_diff_checks_and_rubrics():
    item = DiffItem("extra_effect", "refunds", "R1", None, None, {"id": "R1"}, None, (0,))
    outcome = grade(
        diff=[item],
        checks=[CheckResult("no_new_rows", "no refunds", False)],
        rubrics=[RubricResult("q", False)],
        termination="agent_done",
        tool_calls=[_call(0)],
    )
    assert (outcome.verdict, outcome.categories, outcome.clean_looking) == (
        "fail",
        ["check_failed", "extra_effect", "rubric_failed"],
        True,
    )
    assert (
        grade(
            diff=[], checks=[], rubrics=[RubricResult("q", True)], termination="agent_done", tool_calls=[]
        ).verdict
        == "pass"
    )


def test_grade_unjudged_rubric_is_unjudged_unless_something_else_fails():
    unjudged = [RubricResult("q", None, "unjudged: keyword judge has no keywords for this question")]
    alone = grade(diff=[], checks=[], rubrics=unjudged, termination="agent_done", tool_calls=[_call(0)])
    item = DiffItem("missing_effect", "tickets", "20", "status", "open", "open", "hold", ())
    with_diff = grade(
        diff=[item], checks=[], rubrics=unjudged, termination="agent_done", tool_calls=[_call(0)]
    )
    assert (alone.verdict, alone.categories, alone.clean_looking) == ("unjudged", [], False)
    assert (with_diff.verdict, with_diff.categories) == ("fail", ["missing_effect"])


def test_clean_looking_needs_clean_end_a_write_and_no_final_error():
    writes = [_call(0, read_only=True), _call(1)]
    assert is_clean_looking("fail", "user_done", writes) is True
    assert is_clean_looking("fail", "max_turns", writes) is False
    assert is_clean_looking("fail", "agent_done", [_call(0, read_only=True)]) is False
    assert (
        is_clean_looking("fail", "agent_done", [_call(0), _call(1, read_only=True, error="not found")])
        is False
    )
    assert is_clean_looking("pass", "agent_done", writes) is False
