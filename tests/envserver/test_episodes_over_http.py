"""Environment server over real HTTP on 127.0.0.1: reset/step/done/reward, expiry, isolation, trust boundary."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest

from tb_engine.attempt_setup import make_agent, run_task
from tb_engine.interfaces import AgentStep
from tb_engine.loader import load_builtin_suite
from tb_engine.training import Environment, EvaluationOnlyError
from tb_envserver import EnvServer
from tb_envserver.client import EnvClient, EnvClientError, rollout

SUITE = load_builtin_suite()
TASK = "retail/ticket_hold_carrier_exception"


class NoOpAgent:
    name = "noop"

    def step(self, view):
        return AgentStep(text="All done.", done=True)


@pytest.fixture
def serve():
    servers = []

    def start(suite=SUITE, **kwargs):
        server = EnvServer(Environment(suite, **kwargs))
        server.start_background()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown_all()


def _factory(spec: str, seed: int):
    def make(task_id: str):
        task = SUITE.tasks[task_id]
        return (
            NoOpAgent()
            if spec == "noop"
            else make_agent(spec, task=task, domain=SUITE.domains[task.domain], seed=seed)
        )

    return make


@pytest.mark.parametrize("spec", ["golden", "noop", "sim:careless", "sim:explorer"])
def test_envserver_reward_equals_grader_verdict_on_every_task(serve, spec):
    client = EnvClient(serve().url)
    mismatches = []
    for seed, task_id in enumerate(sorted(SUITE.tasks)):
        task = SUITE.tasks[task_id]
        graded = run_task(
            SUITE.domains[task.domain],
            task,
            agent=_factory(spec, seed)(task_id),
        )
        episode = rollout(client, _factory(spec, seed), task_id=task_id)
        if (episode.reward, episode.info["categories"]) != (
            1.0 if graded.verdict == "pass" else 0.0,
            graded.categories,
        ):
            mismatches.append((task_id, episode.reward, graded.verdict))
    assert mismatches == []


def test_envserver_reset_returns_policy_tools_and_first_user_message(serve):
    client = EnvClient(serve().url)
    started = client.reset(task_id=TASK)
    task, domain = SUITE.tasks[TASK], SUITE.domains["retail"]
    assert started["task_id"] == TASK
    assert len(started["episode_id"]) == 32
    assert started["observation"]["policy"] == domain.policy
    assert started["observation"]["messages"] == [{"role": "user", "content": task.query}]
    assert sorted(t["name"] for t in started["observation"]["tools"]) == sorted(domain.tools)


def test_envserver_reward_is_zero_until_done_then_verdict(serve):
    client = EnvClient(serve().url)
    started = client.reset(task_id=TASK)
    golden = SUITE.tasks[TASK].golden
    calls = [{"id": f"g{i}", "name": c.tool, "arguments": dict(c.arguments)} for i, c in enumerate(golden)]
    middle = client.step(started["episode_id"], tool_calls=calls)
    assert (middle["reward"], middle["done"], middle["info"]) == (0.0, False, {})
    assert [m["tool_call_id"] for m in middle["observation"]["messages"]] == [
        f"g{i}" for i in range(len(golden))
    ]
    final = client.step(
        started["episode_id"], text=SUITE.tasks[TASK].extra.get("golden_reply") or "Done.", done=True
    )
    assert (final["reward"], final["done"], final["info"]["verdict"]) == (1.0, True, "pass")
    state = client.state(started["episode_id"])
    assert (state["done"], state["reward"], state["termination"], state["turn"]) == (
        True,
        1.0,
        "agent_done",
        2,
    )
    with pytest.raises(EnvClientError) as again:
        client.step(started["episode_id"], text="more", done=True)
    assert again.value.status == 409


def test_envserver_episodes_on_one_task_are_isolated(serve):
    url = serve().url
    writer, idle = EnvClient(url), EnvClient(url)
    a, b = writer.reset(task_id=TASK), idle.reset(task_id=TASK)
    golden = SUITE.tasks[TASK].golden
    writer.step(
        a["episode_id"], tool_calls=[{"name": c.tool, "arguments": dict(c.arguments)} for c in golden]
    )
    finished_b = idle.step(b["episode_id"], text="Nothing to do.", done=True)
    finished_a = writer.step(
        a["episode_id"], text=SUITE.tasks[TASK].extra.get("golden_reply") or "Done.", done=True
    )
    assert finished_b["reward"] == 0.0
    assert finished_b["info"]["diff_counts"]["missing_effect"] >= 1  # A's writes never reached B's sandbox
    assert finished_a["reward"] == 1.0


def test_envserver_concurrent_episodes_each_get_their_own_verdict(serve):
    url = serve().url
    rewards: dict[int, float] = {}

    def worker(index: int) -> None:
        client = EnvClient(url)
        spec = "golden" if index % 2 == 0 else "noop"
        rewards[index] = rollout(client, _factory(spec, index), task_id=TASK).reward
        client.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert rewards == {i: (1.0 if i % 2 == 0 else 0.0) for i in range(16)}


def test_envserver_idle_episode_expires_and_its_sandbox_is_released(serve):
    now = [1000.0]
    server = serve(ttl_s=60.0, clock=lambda: now[0])
    client = EnvClient(server.url)
    started = client.reset(task_id=TASK)
    episode = server.env._open[started["episode_id"]]
    steps = episode.steps
    now[0] += 61.0
    with pytest.raises(EnvClientError) as gone:
        client.state(started["episode_id"])
    assert gone.value.status == 410
    assert gone.value.message == f"episode {started['episode_id']}: expired after 60 s without activity"
    assert (episode.steps, episode.backend, steps.gi_frame) == (
        None,
        None,
        None,
    )  # attempt closed, sandbox handed back
    assert client.health()["episodes"] == 0


def test_envserver_observations_never_carry_golden_data(serve):
    sentinels = ("SENTINEL-CHECK", "SENTINEL-RUBRIC", "SENTINEL-CONTEXT", "SENTINEL-REPLY")
    task = SUITE.tasks[TASK]
    planted = dataclasses.replace(
        task,
        checks=tuple(
            dataclasses.replace(c, description=f"{sentinels[0]} {c.description}") for c in task.checks
        ),
        rubrics=(f"{sentinels[1]} did it explain?",),
        user_context=f"I am a customer. {sentinels[2]} secret plan.",
        extra={**task.extra, "golden_reply": sentinels[3]},
    )
    suite = dataclasses.replace(SUITE, tasks={**SUITE.tasks, TASK: planted})
    client = EnvClient(serve(suite).url)
    started = client.reset(task_id=TASK)
    bodies = [json.dumps(started)]
    bodies.append(json.dumps(client.step(started["episode_id"], text="Could you confirm the order number?")))
    bodies.append(json.dumps(client.step(started["episode_id"], text="I will leave it as is.", done=True)))
    bodies.append(json.dumps(client.state(started["episode_id"])))
    assert [s for s in sentinels if any(s in body for body in bodies)] == []


def test_envserver_bad_requests_name_the_field(serve):
    client = EnvClient(serve().url)
    started = client.reset(task_id=TASK)
    cases = [
        (
            {"tool_calls": [{"arguments": {}}]},
            400,
            "action.tool_calls[0].name: a non-empty tool name is required",
        ),
        ({"text": 5}, 400, "action.text: expected str, got int"),
        ({"speak": "hi"}, 400, "action: unknown field(s) speak (use text, tool_calls, done)"),
    ]
    for action, status, message in cases:
        with pytest.raises(EnvClientError) as caught:
            client._request("POST", "/step", {"episode_id": started["episode_id"], "action": action})
        assert (caught.value.status, caught.value.message) == (status, message)
    with pytest.raises(EnvClientError) as unknown:
        client.state("nope")
    assert (unknown.value.status, unknown.value.message) == (404, "episode nope: unknown")


def test_envserver_invalid_tool_arguments_become_a_repair_message(serve):
    client = EnvClient(serve().url)
    started = client.reset(task_id=TASK)
    answer = client._request(
        "POST",
        "/step",
        {
            "episode_id": started["episode_id"],
            "action": {"tool_calls": [{"name": "get_order", "arguments": "{oops"}]},
        },
    )
    messages = answer["observation"]["messages"]
    assert answer["done"] is False
    assert [m.get("is_error") for m in messages] == [True]
    assert messages[0]["content"].startswith(
        "Your last output could not be used: tool call 0 (get_order): arguments are not valid JSON"
    )


def test_envserver_pool_restricts_tasks_and_seed_draws_deterministically(serve):
    pool = sorted(SUITE.tasks)[:3]
    client = EnvClient(serve(task_ids=pool).url)
    with pytest.raises(EnvClientError) as refused:
        client.reset(task_id=sorted(SUITE.tasks)[5])
    drawn = [client.reset(seed=7)["task_id"] for _ in range(2)]
    assert refused.value.status == 403
    assert drawn[0] == drawn[1]
    assert drawn[0] in pool


def test_envserver_refuses_evaluation_only_suite_unless_overridden():
    locked = dataclasses.replace(SUITE, evaluation_only=True)
    with pytest.raises(EvaluationOnlyError) as refused:
        Environment(locked)
    assert str(refused.value) == (
        "suite starter v1.0 is evaluation-only (its licence forbids training on it); pass --allow-evaluation-only to override"
    )
    assert Environment(locked, allow_evaluation_only=True).pool == sorted(SUITE.tasks)
