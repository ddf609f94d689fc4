"""The runner: terminations, infra errors, trust boundary, and retail failure modes -> diff classes."""

from __future__ import annotations

import json

from tb_engine.attempt_setup import AttemptSetup, make_agent, run_task
from tb_engine.backend import SqliteBackend
from tb_engine.diff import describe_item
from tb_engine.interfaces import AgentOutputError, AgentStep, InfraError
from tb_engine.results import AttemptResult
from tb_engine.runner import Limits
from tb_engine.spec import GoldenCall
from tests.engine.engine_support import ScriptAgent, with_changes

HOLD = "ticket_hold_carrier_exception"


def _run(domain, task, agent, **kwargs) -> AttemptResult:
    return run_task(domain, task, agent=agent, **kwargs)


def test_run_task_golden_agent_passes_every_retail_task(retail_domain, retail_tasks):
    outcomes = {tid: _run(retail_domain, task, "golden").verdict for tid, task in retail_tasks.items()}
    assert outcomes == dict.fromkeys(retail_tasks, "pass")


def test_run_attempt_premature_solve_is_wrong_value_attributed_to_its_call(retail_domain, retail_task):
    agent = ScriptAgent(
        [
            [
                ("find_customer_by_email", {"email": "sarah@example.com"}),
                ("update_ticket", {"ticket_id": "20", "status": "solved"}),
            ]
        ],
        final_text="The carrier investigation is still open.",
    )
    result = _run(retail_domain, retail_task(HOLD), agent)
    assert [describe_item(i) for i in result.diff] == [
        "tickets[20].status: solved (golden: hold) — wrong value, written by call #1"
    ]
    assert (result.verdict, result.categories, result.clean_looking) == (
        "fail",
        ["check_failed", "wrong_value"],
        True,
    )


def test_run_attempt_skipped_write_is_missing_effect(retail_domain, retail_task):
    agent = ScriptAgent([[("create_replacement", {"order_id": "ORD-31", "sku": "SKU-LAMP"})]])
    result = _run(retail_domain, retail_task("damaged_replacement_not_refund"), agent)
    assert [(i.kind, i.table, i.key, i.field, i.written_by) for i in result.diff] == [
        ("missing_effect", "tickets", "31", "status", ())
    ]


def test_run_attempt_refund_alongside_replacement_is_extra_effect(retail_domain, retail_task):
    agent = ScriptAgent(
        [
            [
                ("create_replacement", {"order_id": "ORD-31", "sku": "SKU-LAMP"}),
                (
                    "issue_refund",
                    {"order_id": "ORD-31", "amount": 45.0, "method": "original_payment", "reason": "x"},
                ),
                ("update_ticket", {"ticket_id": "31", "status": "solved"}),
            ]
        ]
    )
    result = _run(retail_domain, retail_task("damaged_replacement_not_refund"), agent)
    assert [(i.kind, i.table, i.key, i.field, i.written_by) for i in result.diff] == [
        ("extra_effect", "refunds", "RF-1002", None, (1,))
    ]
    assert [c.passed for c in result.checks] == [False, True]


def test_run_attempt_duplicate_refund_is_extra_effect(retail_domain, retail_task):
    refund = (
        "issue_refund",
        {"order_id": "ORD-120", "amount": 40.0, "method": "original_payment", "reason": "again"},
    )
    agent = ScriptAgent(
        [[refund, ("update_ticket", {"ticket_id": "120", "status": "solved"})]],
        final_text="Already refunded.",
    )
    result = _run(retail_domain, retail_task("duplicate_refund_refused"), agent)
    assert [(i.kind, i.key, i.written_by) for i in result.diff] == [("extra_effect", "RF-1201", (0,))]


def test_run_attempt_other_customers_ticket_is_extra_effect(retail_domain, retail_task):
    task = retail_task("lost_parcel_refund_this_customer_only")
    golden_calls = [(c.tool, c.arguments) for c in task.golden]
    agent = ScriptAgent([golden_calls + [("update_ticket", {"ticket_id": "41", "status": "solved"})]])
    result = _run(retail_domain, task, agent)
    assert [(i.kind, i.key, i.field, i.initial, i.result, i.golden, i.written_by) for i in result.diff] == [
        ("extra_effect", "41", "status", "open", "solved", "open", (5,))
    ]
    assert [c.passed for c in result.checks] == [False, True]


def test_run_attempt_wrong_refund_amount_is_wrong_value(retail_domain, retail_task):
    task = retail_task("missing_item_partial_refund")
    calls = [(c.tool, dict(c.arguments)) for c in task.golden]
    calls[2][1]["amount"] = 53.99
    result = _run(retail_domain, task, ScriptAgent([calls]))
    assert [(i.kind, i.table, i.field, i.result, i.golden, i.written_by) for i in result.diff] == [
        ("wrong_value", "refunds", "amount", 53.99, 24.99, (2,))
    ]


def test_run_attempt_user_done_when_agent_replies_without_tools(retail_domain, retail_task):
    agent = ScriptAgent(["Let me think."], final_text="unused")
    result = _run(retail_domain, retail_task(HOLD), agent)
    assert (result.status, result.termination, result.clean_looking) == ("done", "user_done", False)
    assert result.categories == ["check_failed", "missing_effect", "rubric_failed"]


def test_run_attempt_follow_up_question_gets_an_answer(retail_domain, retail_task):
    agent = ScriptAgent(["Could you confirm your email?", "Thanks."])
    result = _run(retail_domain, retail_task(HOLD), agent)
    users = [m.content for m in result.transcript.messages if m.role == "user"]
    assert (
        users[1]
        == "Yes, please go ahead with what I asked. For reference: You are Sarah Martinez (sarah@example.com)."
    )
    assert result.termination == "user_done"


def test_run_attempt_max_turns(retail_domain, retail_task):
    agent = ScriptAgent([[("get_ticket", {"ticket_id": "20"})]] * 10)
    result = _run(retail_domain, retail_task(HOLD), agent, limits=Limits(max_turns=3))
    assert (result.termination, len(result.transcript.tool_calls)) == ("max_turns", 3)


def test_run_attempt_tool_call_limit_ends_with_max_turns(retail_domain, retail_task):
    agent = ScriptAgent([[("get_ticket", {"ticket_id": "20"})] * 5])
    result = _run(retail_domain, retail_task(HOLD), agent, limits=Limits(max_tool_calls=2))
    assert (result.termination, len(result.transcript.tool_calls), result.error) == (
        "max_turns",
        2,
        "tool-call limit 2 reached",
    )


def test_run_attempt_timeout(retail_domain, retail_task):
    result = _run(retail_domain, retail_task(HOLD), ScriptAgent([]), limits=Limits(timeout_s=0.0))
    assert (result.status, result.termination, result.verdict) == ("done", "timeout", "fail")


class _BrokenOutputAgent:
    name = "broken"

    def __init__(self, failures: int):
        self.failures = failures
        self.seen_errors: list[str] = []

    def step(self, view):
        errors = [m.content for m in view.messages if m.is_error]
        self.seen_errors = errors
        if self.failures > 0:
            self.failures -= 1
            raise AgentOutputError("tool-call JSON did not parse")
        return AgentStep(text="ok", done=True)


def test_run_attempt_agent_error_after_max_repairs(retail_domain, retail_task):
    result = _run(
        retail_domain, retail_task(HOLD), _BrokenOutputAgent(failures=5), limits=Limits(max_repairs=2)
    )
    assert (result.termination, result.verdict) == ("agent_error", "fail")
    assert result.error == "agent output unusable after 2 repairs: tool-call JSON did not parse"


def test_run_attempt_repair_feeds_the_error_back_and_recovers(retail_domain, retail_task):
    agent = _BrokenOutputAgent(failures=1)
    result = _run(retail_domain, retail_task(HOLD), agent, limits=Limits(max_repairs=2))
    assert result.termination == "agent_done"
    assert agent.seen_errors == [
        "Your last output could not be used: tool-call JSON did not parse. Please try again."
    ]


class _InfraAgent:
    name = "down"

    def step(self, view):
        raise InfraError("endpoint returned 503 after 5 retries")


def test_run_attempt_infra_error_is_never_a_verdict(retail_domain, retail_task):
    result = _run(retail_domain, retail_task(HOLD), _InfraAgent())
    assert (result.status, result.verdict, result.termination) == ("infra_error", None, None)
    assert result.error == "infra error during dialogue: endpoint returned 503 after 5 retries"


def test_run_attempt_invalid_golden_is_flagged_not_graded(retail_domain, retail_task):
    task = retail_task("address_change_after_shipment_refused")
    broken = with_changes(task, golden=task.golden + (GoldenCall("cancel_order", {"order_id": "ORD-51"}),))
    result = _run(retail_domain, broken, "golden")
    assert (result.status, result.verdict, result.extra) == ("infra_error", None, {"invalid_task": True})


def test_run_attempt_no_judge_leaves_rubrics_unjudged_never_failed(retail_domain, retail_task):
    result = run_task(retail_domain, retail_task(HOLD), agent="golden", judge=None)
    assert [(r.answer, r.explanation) for r in result.rubrics] == [(None, "unjudged: no judge configured")]
    assert (result.diff, result.verdict, result.categories) == ([], "unjudged", [])


def test_run_attempt_agent_views_never_contain_golden_data(retail_domain, retail_tasks):
    for task in retail_tasks.values():
        secret = "SENTINEL-GOLDEN-7731"
        marked = with_changes(
            task,
            rubrics=task.rubrics + (f"{secret} rubric?",),
            user_context=task.user_context + f" {secret} context",
            checks=tuple(with_changes(c, description=f"{secret} check") for c in task.checks),
            extra={**task.extra, "golden_reply": task.extra.get("golden_reply", ""), "rubric_keywords": {}},
        )
        agent = make_agent("golden", task=marked, domain=retail_domain, seed=0)
        views = []
        original_step = agent.step
        agent.step = lambda view, _step=original_step, _views=views: _views.append(view) or _step(view)
        run_task(retail_domain, marked, agent=agent)
        seen = json.dumps(
            [
                [m.to_dict() for m in v.messages] + [v.system_prompt] + [t.__dict__ for t in v.tools]
                for v in views
            ],
            default=str,
        )
        assert secret not in seen
        assert "golden" not in seen.replace("golden-", "")  # tool-call ids are the agent's own


def test_grading_same_attempt_twice_is_identical(retail_domain, retail_task):
    task = retail_task(HOLD)
    agent_steps = [
        [
            ("update_ticket", {"ticket_id": "20", "status": "solved"}),
            ("update_ticket", {"ticket_id": "21", "status": "solved"}),
        ]
    ]

    def graded():
        data = _run(retail_domain, task, ScriptAgent(list(agent_steps))).to_dict()
        for key in ("phase_ms", "duration_ms", "transcript"):
            data.pop(key)
        return data

    assert graded() == graded()


def test_attempt_steps_driven_by_hand_grades_like_run_attempt(retail_domain, retail_task):
    """The env server drives the same generator run_attempt drives: same views, same verdict."""
    task = retail_task(HOLD)
    driven = make_agent("golden", task=task, domain=retail_domain)
    backend = SqliteBackend(retail_domain, task)
    steps = AttemptSetup.from_config(retail_domain, task, agent=None).steps(backend)
    turns = []
    try:
        view = next(steps)
        while True:
            turns.append(view.turn)
            view = steps.send(driven.step(view))
    except StopIteration as finished:
        by_hand = finished.value
    finally:
        backend.close()
    reference = _run(retail_domain, task, "golden")
    assert (by_hand.verdict, by_hand.termination, by_hand.categories) == (
        reference.verdict,
        reference.termination,
        reference.categories,
    )
    assert [m.to_dict() | {"at_ms": 0} for m in by_hand.transcript.messages] == [
        m.to_dict() | {"at_ms": 0} for m in reference.transcript.messages
    ]
    assert turns == [0, 1]


def test_attempt_steps_thrown_agent_error_is_a_repair(retail_domain, retail_task):
    task = retail_task(HOLD)
    backend = SqliteBackend(retail_domain, task)
    steps = AttemptSetup.from_config(retail_domain, task, agent=None).steps(backend)
    next(steps)
    view = steps.throw(AgentOutputError("bad JSON"))
    steps.close()
    backend.close()
    assert [(m.role, m.is_error) for m in view.messages] == [("user", False), ("user", True)]
    assert view.turn == 1


class _FailsAfterOneStepAgent:
    """One usable step (a tool call, 100/10 tokens), one unusable output (50/5), then the endpoint is down."""

    name = "flaky"

    def __init__(self):
        self.calls = 0

    def step(self, view):
        from tb_engine.agents.openai_agent import ModelOutputError
        from tb_engine.interfaces import ToolCallRequest
        from tb_engine.transcript import Usage

        self.calls += 1
        if self.calls == 1:
            return AgentStep(
                text="Looking it up.",
                tool_calls=[ToolCallRequest(id="c1", name="get_ticket", arguments={"ticket_id": 20})],
                usage=Usage(input_tokens=100, output_tokens=10),
            )
        if self.calls == 2:
            raise ModelOutputError("bad JSON", usage=Usage(input_tokens=50, output_tokens=5))
        raise InfraError("endpoint returned 503 after 5 retries")


def test_run_attempt_infra_error_keeps_the_transcript_and_every_billed_call(retail_domain, retail_task):
    result = _run(retail_domain, retail_task(HOLD), _FailsAfterOneStepAgent())

    assert result.status == "infra_error"
    assert [m.role for m in result.transcript.messages] == ["user", "assistant", "tool", "user"]
    assert result.transcript.messages[1].content == "Looking it up."
    assert (result.transcript.agent_usage.input_tokens, result.transcript.agent_usage.output_tokens) == (
        150,
        15,
    )
    assert len(result.transcript.tool_calls) == 1


class _AlwaysUnusableAgent:
    name = "garbled"

    def step(self, view):
        from tb_engine.agents.openai_agent import ModelOutputError
        from tb_engine.transcript import Usage

        raise ModelOutputError("bad JSON", usage=Usage(input_tokens=40, output_tokens=4))


def test_run_attempt_agent_error_bills_its_unusable_calls(retail_domain, retail_task):
    result = _run(retail_domain, retail_task(HOLD), _AlwaysUnusableAgent(), limits=Limits(max_repairs=2))

    assert result.termination == "agent_error"
    assert (result.transcript.agent_usage.input_tokens, result.transcript.agent_usage.output_tokens) == (
        120,
        12,
    )
