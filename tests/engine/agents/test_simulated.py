"""Simulated personas without the engine runner: plan mutations, determinism, labels, tokens, reversal."""

import dataclasses

import pandas as pd
import pytest

from tb_engine.agents.simulated import PERSONAS, Persona, SimulatedAgent, make_simulated_agent
from tb_engine.interfaces import AgentView, ToolSchema
from tb_engine.metrics import campaign_metrics, reversals
from tb_engine.spec import DomainSpec, GoldenCall, TableSpec, TaskSpec, ToolSpec
from tb_engine.transcript import Message

STATUS = {"type": "string", "enum": ["open", "hold", "solved"]}
DOMAIN = DomainSpec(
    name="desk",
    title="Desk",
    policy="You are a support agent. Follow the refund policy.",
    tables={
        "tickets": TableSpec("tickets", {"id": "text", "customer_id": "text", "status": "text"}, ("id",)),
        "refunds": TableSpec(
            "refunds", {"id": "text", "order_id": "text", "amount": "real"}, ("id",), generated_key=True
        ),
    },
    tools={
        "get_ticket": ToolSpec(
            "get_ticket",
            "Look up a ticket.",
            {"type": "object", "properties": {"ticket_id": {"type": "string"}}},
            read_only=True,
        ),
        "update_ticket": ToolSpec(
            "update_ticket",
            "Set a ticket's status.",
            {"type": "object", "properties": {"ticket_id": {"type": "string"}, "status": STATUS}},
        ),
        "create_refund": ToolSpec(
            "create_refund",
            "Refund an order.",
            {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
            },
        ),
    },
    base_data={
        "tickets": [
            {"id": "20", "customer_id": "C-1", "status": "open"},
            {"id": "21", "customer_id": "C-2", "status": "open"},
        ]
    },
)


def task(task_id="desk/hold"):
    return TaskSpec(
        id=task_id,
        domain="desk",
        query="My order is late.",
        user_context="You are Sam.",
        data_patch={"tickets": [{"id": "22", "customer_id": "C-3", "status": "open"}]},
        golden=(
            GoldenCall("get_ticket", {"ticket_id": "20"}),
            GoldenCall("update_ticket", {"ticket_id": "20", "status": "hold"}),
            GoldenCall("create_refund", {"order_id": "ORD-20", "amount": 40.0}),
        ),
    )


def forced(mode, seed=0, **overrides):
    """A persona that always fails, and only in ``mode``."""
    persona = Persona(
        name=f"only-{mode}",
        description="test persona (simulation)",
        success_probability=lambda u: 0.0,
        failure_weights={mode: 1.0},
        **overrides,
    )
    return SimulatedAgent(persona, task=task(), domain=DOMAIN, seed=seed)


def drive(agent, max_steps=20):
    """Step the agent with a growing untrusted view, answering every tool call with an ok result."""
    tools = [ToolSchema(t.name, t.description, t.parameters, t.read_only) for t in DOMAIN.tools.values()]
    messages = [Message(role="user", content=task().query)]
    steps = []
    for _ in range(max_steps):
        step = agent.step(AgentView(system_prompt=DOMAIN.policy, tools=tools, messages=list(messages)))
        steps.append(step)
        messages.append(Message(role="assistant", content=step.text, tool_calls=step.tool_calls))
        for call in step.tool_calls:
            messages.append(
                Message(role="tool", content='{"ok": true}', tool_call_id=call.id, name=call.name)
            )
        if step.done:
            return steps
    raise AssertionError("agent never finished")


def plan_of(agent):
    return [(c.tool, c.arguments) for c in agent.plan]


def test_persona_skip_write_drops_one_state_changing_call():
    agent = forced("skip_write")
    assert len(agent.plan) == 2
    assert [c.tool for c in agent.plan].count("get_ticket") == 1
    assert agent.mutations[0].mode == "skip_write"


def test_persona_wrong_enum_picks_another_enum_value():
    agent = forced("wrong_enum")
    update = [c for c in agent.plan if c.tool == "update_ticket"][0]
    assert update.arguments["status"] in ("open", "solved")
    assert update.arguments["ticket_id"] == "20"


def test_persona_wrong_number_perturbs_the_amount_within_schema():
    agent = forced("wrong_number")
    refund = [c for c in agent.plan if c.tool == "create_refund"][0]
    assert refund.arguments["amount"] != 40.0
    assert refund.arguments["amount"] >= 0


def test_persona_repeat_write_prefers_creations():
    agent = forced("repeat_write")
    assert [c.tool for c in agent.plan] == ["get_ticket", "update_ticket", "create_refund", "create_refund"]


def test_persona_other_record_swaps_to_another_existing_key_of_the_table():
    agent = forced("other_record")
    update = [c for c in agent.plan if c.tool == "update_ticket"][0]
    # 21 from the base data or 22 from the task's patch: another customer's ticket.
    assert update.arguments["ticket_id"] in ("21", "22")
    assert agent.mutations[0].detail.startswith("update_ticket.ticket_id: '20' -> ")


def test_persona_give_up_stops_before_a_write_and_apologises():
    agent = forced("give_up")
    assert agent.plan[0].tool == "get_ticket"
    assert all(c.tool != "create_refund" for c in agent.plan)
    steps = drive(agent)
    assert steps[-1].done is True
    assert "sorry" in steps[-1].text.lower() or "human agent" in steps[-1].text


def test_persona_without_writes_to_spoil_follows_the_plan():
    read_only = dataclasses.replace(task(), golden=(GoldenCall("get_ticket", {"ticket_id": "20"}),))
    persona = Persona("only-skip", "test (simulation)", lambda u: 0.0, {"skip_write": 1.0})
    agent = SimulatedAgent(persona, task=read_only, domain=DOMAIN, seed=3)
    assert plan_of(agent) == [("get_ticket", {"ticket_id": "20"})]
    assert agent.mutations == []


def test_persona_success_follows_golden_plan_exactly():
    persona = Persona("always", "test (simulation)", lambda u: 1.0, {"skip_write": 1.0})
    agent = SimulatedAgent(persona, task=task(), domain=DOMAIN, seed=1)
    assert plan_of(agent) == [(c.tool, c.arguments) for c in task().golden]
    steps = drive(agent)
    assert [c.name for s in steps for c in s.tool_calls] == ["get_ticket", "update_ticket", "create_refund"]
    assert steps[-1].text.startswith(("All done", "Your request", "Great news"))


def test_simulated_agent_is_deterministic_for_a_fixed_seed():
    for name in PERSONAS:
        first = drive(make_simulated_agent(name, task=task(), domain=DOMAIN, seed=11))
        second = drive(make_simulated_agent(name, task=task(), domain=DOMAIN, seed=11))
        assert first == second


def test_simulated_agent_latent_difficulty_ignores_seed_but_noise_does_not():
    agents = [make_simulated_agent("explorer", task=task(), domain=DOMAIN, seed=s) for s in range(40)]
    assert len({a.latent for a in agents}) == 1
    assert len({a.intends_success for a in agents}) == 2
    assert make_simulated_agent("steady", task=task(), domain=DOMAIN, seed=0).latent != agents[0].latent


def test_simulated_agent_names_and_descriptions_say_simulation():
    assert len(PERSONAS) >= 3
    for name, persona in PERSONAS.items():
        agent = make_simulated_agent(name, task=task(), domain=DOMAIN, seed=0)
        assert agent.name == f"sim:{name} (simulated persona, not a model)"
        assert persona.description.startswith("Simulated persona, not a model")


def test_make_simulated_agent_unknown_persona_names_it():
    with pytest.raises(
        KeyError, match="'genius' is unknown; known: careless, cautious, explorer, family-ace, "
    ):
        make_simulated_agent("genius", task=task(), domain=DOMAIN, seed=0)


def test_simulated_agent_transcript_text_never_mentions_the_mutation():
    for mode in ("skip_write", "wrong_enum", "wrong_number", "repeat_write", "other_record"):
        steps = drive(forced(mode))
        text = " ".join(s.text for s in steps).lower()
        assert mode.replace("_", " ") not in text and mode not in text and "mutat" not in text
        assert steps[-1].text.startswith(("All done", "Your request", "Great news"))  # confident anyway


def test_simulated_agent_token_counts_grow_and_reasoning_only_for_explorer():
    for name in PERSONAS:
        steps = drive(make_simulated_agent(name, task=task(), domain=DOMAIN, seed=2))
        inputs = [s.usage.input_tokens for s in steps]
        assert inputs == sorted(inputs) and inputs[0] > 0
        assert all(s.usage.cached_input_tokens <= s.usage.input_tokens for s in steps)
        assert steps[0].usage.cached_input_tokens == 0
        assert all(s.usage.output_tokens >= s.usage.reasoning_tokens for s in steps)
        reasoning = sum(s.usage.reasoning_tokens for s in steps)
        assert (reasoning > 0) == (name == "explorer")


def planned_per_task(persona, task_ids, n_attempts):
    """(n, c) per task from the personas' own success draws (no runner involved)."""
    rows = []
    for task_id in task_ids:
        spec = task(task_id)
        c = sum(
            make_simulated_agent(persona, task=spec, domain=DOMAIN, seed=s).intends_success
            for s in range(n_attempts)
        )
        rows.append((task_id, "desk", n_attempts, c))
    return pd.DataFrame(rows, columns=["task_id", "domain", "n", "c"])


def test_steady_and_explorer_reverse_between_pass_at_n_and_all_n_on_planned_outcomes():
    task_ids = [f"desk/task_{i}" for i in range(40)]
    figures = {}
    for persona in ("steady", "explorer"):
        result = campaign_metrics(planned_per_task(persona, task_ids, 20), n_attempts=20, replicates=200)
        figures[persona] = (result["pass_at_n_observed"]["value"], result["all_n"]["value"])
    assert figures["explorer"][0] > figures["steady"][0]
    assert figures["explorer"][1] < figures["steady"][1]
    assert reversals(figures) == [("explorer", "steady")]
