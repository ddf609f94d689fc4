"""Fault plans (tb_engine.faults): each kind's effect on the call and the state, the record, determinism."""

from __future__ import annotations

import pytest

from tb_engine.attempt_setup import AttemptSetup, run_task
from tb_engine.backend import SqliteBackend
from tb_engine.faults import (
    FAULT_KINDS,
    FaultPlan,
    FaultPlanError,
    FaultyBackend,
    faults_of,
)
from tb_engine.loader import load_builtin_suite
from tb_engine.transcript import ToolCallRequest

REFUND_TASK = "travel/duplicate_charge_refund_once"  # find, get_booking, issue_refund, update_case


@pytest.fixture(scope="module")
def suite():
    return load_builtin_suite()


def _refund_backend(suite, plan, *, attempt=0, sleep=None):
    task = suite.tasks[REFUND_TASK]
    inner = SqliteBackend(suite.domains[task.domain], task)
    extra = {} if sleep is None else {"sleep": sleep}
    return FaultyBackend(inner, plan, task_id=task.id, attempt=attempt, **extra), task


def _refund(backend, index):
    request = ToolCallRequest(
        f"r{index}", "issue_refund", {"booking_id": "BK-2090", "amount": 10, "reason": "dup"}
    )
    return backend.call_tool(request, index=index, turn=0)


def _refund_rows(backend):
    return backend.result_snapshot().tables["payments"].rows


def test_error_before_commit_does_not_execute_the_call(suite):
    backend, _ = _refund_backend(suite, FaultPlan((FAULT_KINDS[0],), at_calls=(0,)))
    try:
        before = len(backend.initial_snapshot().tables["payments"].rows)
        call = _refund(backend, 0)
        assert call.error == "service temporarily unavailable (503); please retry later"
        assert call.changed_state is False
        assert len(_refund_rows(backend)) == before
        assert [r["committed"] for r in backend.log.to_dict()["fired"]] == [False]
    finally:
        backend.close()


@pytest.mark.parametrize("kind", ["error_after_commit", "timeout_after_commit"])
def test_after_commit_keeps_the_effect_and_withholds_the_reply(suite, kind):
    backend, _ = _refund_backend(suite, FaultPlan((kind,), at_calls=(0,), timeout_s=30))
    try:
        before = len(backend.initial_snapshot().tables["payments"].rows)
        call = _refund(backend, 0)
        assert call.result is None
        assert call.error in (
            "internal server error (500) while sending the reply",
            "the request timed out after 30 s waiting for the reply",
        )
        assert call.changed_state is True
        assert len(_refund_rows(backend)) == before + 1
        assert backend.log.to_dict()["fired"] == [
            {
                "call": 0,
                "ordinal": 0,
                "kind": kind,
                "tool": "issue_refund",
                "committed": True,
                "detail": "reply withheld",
            }
        ]
    finally:
        backend.close()


def test_duplicate_delivery_executes_twice_under_one_call_index(suite):
    backend, _ = _refund_backend(suite, FaultPlan(("duplicate_delivery",), at_calls=(0,)))
    try:
        before = len(backend.initial_snapshot().tables["payments"].rows)
        call = _refund(backend, 0)
        assert call.error is None
        assert len(_refund_rows(backend)) == before + 2
        assert set(backend.writes().values()) == {(0,)}
    finally:
        backend.close()


def test_slow_reply_waits_and_answers(suite):
    waited = []
    backend, _ = _refund_backend(
        suite, FaultPlan(("slow_reply",), at_calls=(0,), slow_ms=150), sleep=waited.append
    )
    try:
        call = _refund(backend, 0)
        assert call.error is None and call.changed_state is True
        assert waited == [0.15]
        assert call.duration_ms >= 150
    finally:
        backend.close()


def test_read_failure_only_hits_reads(suite):
    plan = FaultPlan(("read_failure", "error_after_commit"), rate=1.0, tools="all")
    backend, _ = _refund_backend(suite, plan)
    try:
        read = backend.call_tool(
            ToolCallRequest("g", "get_booking", {"booking_id": "BK-2090"}), index=0, turn=0
        )
        write = _refund(backend, 1)
        assert read.error == "read failed: the data store is temporarily unavailable (503)"
        assert write.error == "internal server error (500) while sending the reply"
        assert [(r["kind"], r["committed"]) for r in backend.log.to_dict()["fired"]] == [
            ("read_failure", False),
            ("error_after_commit", True),
        ]
    finally:
        backend.close()


def test_named_tools_and_reads_selection():
    plan = FaultPlan(("error_before_commit",), rate=1.0, tools="named", tool_names=("update_case",))
    assert plan.applies_to("update_case", False) is True
    assert plan.applies_to("issue_refund", False) is False
    reads = FaultPlan(("error_before_commit",), rate=1.0, tools="reads")
    assert reads.applies_to("get_booking", True) is True
    assert reads.applies_to("issue_refund", False) is False


def test_planned_ordinal_the_attempt_never_reached_is_reported(suite):
    task = suite.tasks[REFUND_TASK]
    result = run_task(
        suite.domains[task.domain], task, faults=FaultPlan(("error_after_commit",), at_calls=(1, 5))
    )
    record = faults_of(result.extra)
    assert [f["ordinal"] for f in record["fired"]] == [1]
    assert record["unfired"] == [{"ordinal": 5, "reason": "the attempt made 2 call(s) the plan applies to"}]
    assert record["none_fired"] is False


def test_no_eligible_call_means_none_fired(suite):
    task = suite.tasks[REFUND_TASK]
    plan = FaultPlan(("error_after_commit",), tools="named", tool_names=("cancel_booking",), rate=1.0)
    result = run_task(suite.domains[task.domain], task, faults=plan)
    record = faults_of(result.extra)
    assert (record["fired"], record["eligible_calls"], record["none_fired"]) == ([], 0, True)


def _fault_trace(suite, plan, attempts=range(4)):
    trace = []
    for task in list(suite.tasks.values())[:12]:
        for index in attempts:
            result = run_task(
                suite.domains[task.domain], task, agent="sim:naive-retry", faults=plan, attempt_index=index
            )
            trace.append((task.id, index, faults_of(result.extra)["fired"]))
    return trace


def test_same_seed_same_faults_call_for_call(suite):
    plan = FaultPlan(("error_after_commit", "error_before_commit", "duplicate_delivery"), rate=0.4, seed=7)
    first, second = _fault_trace(suite, plan), _fault_trace(suite, plan)
    assert first == second
    assert sum(len(fired) for _, _, fired in first) > 0
    other_seed = _fault_trace(suite, FaultPlan(plan.kinds, rate=0.4, seed=8))
    assert other_seed != first


def test_attempt_index_changes_the_draw(suite):
    plan = FaultPlan(("error_after_commit",), rate=0.5, seed=1)
    by_attempt = [[fired for _, _, fired in _fault_trace(suite, plan, attempts=[i])] for i in (0, 1)]
    assert by_attempt[0] != by_attempt[1]


def test_zero_rate_plan_changes_nothing_but_is_recorded(suite):
    task = suite.tasks[REFUND_TASK]
    domain = suite.domains[task.domain]
    plain = run_task(domain, task)
    planned = run_task(domain, task, faults=FaultPlan(("error_after_commit",), rate=0.0))
    assert planned.verdict == plain.verdict == "pass"
    assert [c.to_dict() | {"started_ms": 0, "duration_ms": 0} for c in planned.transcript.tool_calls] == [
        c.to_dict() | {"started_ms": 0, "duration_ms": 0} for c in plain.transcript.tool_calls
    ]
    assert faults_of(plain.extra) is None
    assert faults_of(planned.extra)["eligible_calls"] == 2


@pytest.mark.parametrize("tools", ["writes", "reads", "all"])
def test_a_plan_that_cannot_fire_runs_unwrapped_and_records_what_the_wrapper_would(suite, tools):
    from tb_engine.attempt_setup import make_agent
    from tb_engine.runner import drive, run_attempt

    task = suite.tasks[REFUND_TASK]
    domain = suite.domains[task.domain]
    plan = FaultPlan(("error_after_commit", "read_failure"), rate=0.0, tools=tools, seed=3)
    setup = AttemptSetup.from_config(domain, task, faults=plan)
    backend = SqliteBackend(domain, task)
    try:
        assert setup.with_faults(backend) is backend  # no FaultyBackend in the way of any call
        stepped = drive(setup.steps(backend), make_agent("golden", task=task))  # the worker's path
    finally:
        backend.close()
    wrapped = FaultyBackend(
        SqliteBackend(domain, task), plan, task_id=task.id, attempt=0, tool_specs=domain.tools
    )
    try:
        by_wrapper = run_attempt(
            task, wrapped, agent=make_agent("golden", task=task), user=setup.user, judge=setup.judge
        )
    finally:
        wrapped.close()
    expected = {"writes": 2, "reads": 2, "all": 4}[tools]  # find, get_booking | issue_refund, update_case
    for result in (setup.run(), stepped):
        assert faults_of(result.extra) == faults_of(by_wrapper.extra)
        assert faults_of(result.extra)["eligible_calls"] == expected


def test_setup_wraps_a_given_backend_too(suite):
    task = suite.tasks[REFUND_TASK]
    domain = suite.domains[task.domain]
    setup = AttemptSetup.from_config(domain, task, faults=FaultPlan(("error_after_commit",), at_calls=(0,)))
    backend = SqliteBackend(domain, task)
    try:
        result = setup.run(backend)
    finally:
        backend.close()
    assert [f["tool"] for f in faults_of(result.extra)["fired"]] == ["issue_refund"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kinds": []}, "kinds: name at least one fault kind"),
        ({"kinds": ["gremlins"]}, "kinds: unknown gremlins"),
        ({"kinds": ["slow_reply"], "rate": 2}, "rate: must be between 0 and 1, got 2.0"),
        (
            {"kinds": ["slow_reply"], "rate": 0.5, "at_calls": [1]},
            "rate and at_calls: give one of them, not both",
        ),
        ({"kinds": ["slow_reply"], "tools": "named"}, "tool_names: name the tools when tools is 'named'"),
        ({"kinds": ["slow_reply"], "colour": "red"}, "unknown field(s): colour"),
    ],
)
def test_bad_plans_are_refused_naming_the_field(data, message):
    with pytest.raises(FaultPlanError) as raised:
        FaultPlan.from_dict(data)
    assert str(raised.value).startswith(message)


def test_plan_round_trips_through_json():
    plan = FaultPlan(("error_after_commit", "read_failure"), rate=0.25, tools="all", seed=3)
    assert FaultPlan.from_dict(plan.to_dict()) == plan


def _attempts(suite, agent, plan, n=3):
    from tb_engine.metrics.faults import FaultedAttempt

    out = []
    for task in suite.tasks.values():
        for index in range(n):
            result = run_task(suite.domains[task.domain], task, agent=agent, faults=plan, attempt_index=index)
            out.append(FaultedAttempt(task.id, result.verdict or "", faults_of(result.extra)))
    return out


def test_figures_separate_naive_from_careful(suite):
    from tb_engine.metrics.faults import fault_figures

    plan = FaultPlan(("error_after_commit",), at_calls=(0,))
    naive = fault_figures(_attempts(suite, "sim:naive-retry", plan, n=1))
    careful = fault_figures(_attempts(suite, "sim:careful-retry", plan, n=1))
    n_tasks = len(suite.tasks)
    for figures in (naive, careful):
        assert (figures["graded"], figures["tasks"], figures["none_fired"]) == (n_tasks, n_tasks, 0)
        assert figures["kinds"]["error_after_commit"]["fired"] == n_tasks
    # careful recovers every task: it confirms the write through a read or, when none can show it,
    # reports instead of re-sending (tests/engine/agents/test_fault_personas.py)
    assert careful["kinds"]["error_after_commit"]["recovered"]["count"] == n_tasks
    assert careful["duplicate_effect"]["count"] == 0
    assert (
        naive["duplicate_effect"]["count"]
        == n_tasks - naive["kinds"]["error_after_commit"]["recovered"]["count"]
    )
    assert naive["duplicate_effect"]["rate"] > careful["duplicate_effect"]["rate"]
    assert naive["pass_at_1"] == naive["kinds"]["error_after_commit"]["recovered"]["rate"]


def test_figures_without_a_plan_say_so():
    from tb_engine.metrics.faults import FaultedAttempt, fault_figures, wilson

    figures = fault_figures([FaultedAttempt("t", "pass", None)])
    assert (figures["planned"], figures["pass_at_1"], figures["duplicate_effect"]["rate"]) == (
        False,
        None,
        None,
    )
    low, high = wilson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)


def test_plan_dict_is_a_fresh_copy_each_time():
    plan = FaultPlan(
        ("error_after_commit",), at_calls=(0, 2), tools="named", tool_names=("issue_refund",), seed=3
    )
    first = plan.to_dict()
    first["kinds"].append("gremlins")
    first["seed"] = 99
    assert plan.to_dict() == {
        "kinds": ["error_after_commit"],
        "rate": 0.0,
        "at_calls": [0, 2],
        "tools": "named",
        "tool_names": ["issue_refund"],
        "seed": 3,
        "slow_ms": 200.0,
        "timeout_s": 30.0,
    }
    assert FaultPlan.from_dict(plan.to_dict()) == plan
