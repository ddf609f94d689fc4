"""LLM rubric judge (and building user and judge from stored settings) against a real scripted server on 127.0.0.1."""

from __future__ import annotations

import pytest

from tb_engine.interfaces import UserView
from tb_engine.llm import EndpointConfig, RetryPolicy
from tb_engine.llm_judge import LLMJudge, parse_yes_no, parse_yes_no_strict
from tb_engine.transcript import Message, ToolCallRequest, Usage
from tb_engine.users.llm_user import LLMUser
from tests.support.scripted_openai_server import ScriptedOpenAIServer, scripted_server_fixture

scripted_server = pytest.fixture(scripted_server_fixture, name="scripted_server")

FAST = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.02)
QUERY = "My order ORD-20 is late."
CONTEXT = "You are Sarah (sarah@example.com). You accept waiting if the carrier investigates."


def endpoint(server: ScriptedOpenAIServer, model: str, label: str) -> EndpointConfig:
    return EndpointConfig(model=model, base_url=server.base_url, api_key_env=None, retry=FAST, label=label)


def dialogue() -> list[Message]:
    return [
        Message(role="user", content=QUERY),
        Message(
            role="assistant",
            content="",
            tool_calls=[ToolCallRequest("c1", "get_order", {"order_id": "ORD-20"})],
        ),
        Message(role="assistant", content="What is your email address?"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yes", True),
        ("No", False),
        ("**Yes** — the reply mentions the investigation.", True),
        ("Answer: no. The reply promises a refund.", False),
        ("Verdict = YES", True),
        ('{"answer": "no", "reason": "missing"}', False),
        ('{"answer": true}', True),
        ("The reply does say so, so the answer is yes.", True),
        ("I cannot tell.", None),
        ("Well, yes and no.", None),
        ("", None),
    ],
)
def test_parse_yes_no_reads_common_answer_shapes(text, expected):
    assert parse_yes_no(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yes", True),
        ("No.", False),
        ("YES\nThe reply mentions it.", True),
        ("\n  no  \nbecause", False),
        ("**Yes** — the reply mentions the investigation.", None),
        ("Answer: no.", None),
        ("The answer is yes.", None),
        ('{"answer": "yes"}', None),
        ("yes, mostly", None),
        ("", None),
    ],
)
def test_parse_yes_no_strict_accepts_only_a_bare_first_line_yes_or_no(text, expected):
    assert parse_yes_no_strict(text) == expected


def test_llm_judge_answers_from_the_model(scripted_server):
    scripted_server.script(
        "judge-model",
        [
            {
                "text": "Yes\nThe reply says the investigation is open.",
                "usage": {"prompt_tokens": 90, "completion_tokens": 12},
            }
        ],
    )
    verdict = LLMJudge(endpoint(scripted_server, "judge-model", "judge")).judge(
        "Does the reply say the investigation is open?", "The carrier investigation is still open."
    )
    assert (verdict.answer, verdict.explanation) == (True, "Yes\nThe reply says the investigation is open.")
    assert verdict.usage == Usage(input_tokens=90, output_tokens=12, calls=1)
    sent = scripted_server.requests_for("judge-model")[0].body["messages"][1]["content"]
    assert sent == (
        "Question: Does the reply say the investigation is open?\n\n"
        "Final reply of the agent:\n<<<\nThe carrier investigation is still open.\n>>>"
    )


def test_llm_judge_reasks_on_an_unreadable_answer_and_sums_usage(scripted_server):
    usage = {"prompt_tokens": 50, "completion_tokens": 5}
    scripted_server.script(
        "judge-model", [{"text": "Hmm, hard to say.", "usage": usage}, {"text": "no", "usage": usage}]
    )
    verdict = LLMJudge(endpoint(scripted_server, "judge-model", "judge")).judge("Q?", "reply")
    assert (verdict.answer, verdict.usage) == (False, Usage(input_tokens=100, output_tokens=10, calls=2))


def test_llm_judge_unreadable_after_retries_leaves_the_rubric_unjudged(scripted_server):
    scripted_server.script("judge-model", [{"text": "maybe", "repeat": 3}])
    verdict = LLMJudge(endpoint(scripted_server, "judge-model", "judge"), parse_retries=2).judge(
        "Q?", "reply"
    )
    assert verdict.answer is None
    assert verdict.explanation == (
        f"unjudged: judge endpoint {scripted_server.base_url} (model 'judge-model') gave no strict yes/no "
        "answer after 3 calls; last answer: 'maybe'"
    )
    assert scripted_server.remaining("judge-model") == 0


def test_llm_judge_endpoint_down_leaves_the_rubric_unjudged(scripted_server):
    scripted_server.script("judge-model", [{"status": 503, "repeat": 10}])
    verdict = LLMJudge(endpoint(scripted_server, "judge-model", "judge"), parse_retries=0).judge(
        "Q?", "reply"
    )
    assert verdict.answer is None
    assert verdict.explanation.startswith(
        f"unjudged: judge endpoint {scripted_server.base_url} (model 'judge-model') unavailable: "
    )


def test_llm_user_and_judge_build_from_stored_settings(scripted_server):
    endpoint_fields = {"model": "user-model", "base_url": scripted_server.base_url, "api_key_env": None}
    scripted_server.script("user-model", [{"text": "Bye! <<END>>"}])
    user = LLMUser.from_dict({"endpoint": endpoint_fields, "stop_token": "<<END>>"})
    judge = LLMJudge.from_dict({"endpoint": {**endpoint_fields, "model": "judge-model"}, "parse_retries": 0})
    step = user.reply(UserView(QUERY, CONTEXT, dialogue()))
    with pytest.raises(ValueError) as caught:
        LLMJudge.from_dict({"endpoint": endpoint_fields, "temperature": 0})
    assert (step.text, step.done, user.config.label, judge.config.label, judge.parse_retries) == (
        "Bye!",
        True,
        "user",
        "judge",
        0,
    )
    assert str(caught.value) == "judge config: unknown field(s): temperature"
