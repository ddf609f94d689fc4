"""Simulated personas end to end: real runner, real sandbox, built-in suite, graded diffs."""

import json
from collections import defaultdict

import pandas as pd
import pytest

from tb_engine.attempt_setup import make_agent, run_task
from tb_engine.loader import load_builtin_suite
from tb_engine.metrics import campaign_metrics, reversals

SUITE = load_builtin_suite()


def run(persona, seeds):
    """Every built-in task attempted once per seed; returns {task id: [AttemptResult]}."""
    results = defaultdict(list)
    for task_id, task in sorted(SUITE.tasks.items()):
        domain = SUITE.domains[task.domain]
        for seed in seeds:
            agent = make_agent(f"sim:{persona}", task=task, domain=domain, seed=seed)
            results[task_id].append(run_task(domain, task, agent=agent))
    return results


@pytest.fixture(scope="module")
def eight_seeds():
    return {persona: run(persona, range(8)) for persona in ("steady", "explorer", "careless", "cautious")}


def diff_kinds(results):
    return {item.kind for attempts in results.values() for r in attempts for item in r.diff}


def test_simulated_attempts_all_complete_without_infra_errors(eight_seeds):
    statuses = {
        r.status for results in eight_seeds.values() for attempts in results.values() for r in attempts
    }
    assert statuses == {"done"}


def test_steady_and_cautious_only_skip_writes_never_add_effects(eight_seeds):
    # Skipping one of two writes to the same cell (two credits to one balance) leaves a partial
    # value: a wrong value by SPEC §3. What these personas never do is write something extra.
    for persona in ("steady", "cautious"):
        kinds = diff_kinds(eight_seeds[persona])
        assert "missing_effect" in kinds
        assert kinds - {"missing_effect", "wrong_value"} == set()


def test_careless_and_explorer_produce_every_diff_class(eight_seeds):
    assert diff_kinds(eight_seeds["careless"]) == {"missing_effect", "extra_effect", "wrong_value"}
    assert diff_kinds(eight_seeds["explorer"]) == {"missing_effect", "extra_effect", "wrong_value"}


def test_careless_failures_look_clean_and_sound_confident(eight_seeds):
    failures = [r for attempts in eight_seeds["careless"].values() for r in attempts if r.verdict == "fail"]
    assert len(failures) > 0
    assert all(r.termination == "agent_done" for r in failures)
    clean = [r for r in failures if r.clean_looking]
    assert len(clean) > len(failures) / 2
    assert all("sorry" not in r.transcript.final_reply().lower() for r in failures)


def test_cautious_gives_up_in_some_attempts_with_an_apology(eight_seeds):
    replies = [r.transcript.final_reply() for attempts in eight_seeds["cautious"].values() for r in attempts]
    assert any(reply.startswith(("I'm sorry", "I don't think I can")) for reply in replies)


def test_simulated_transcripts_carry_no_mutation_record(eight_seeds):
    for attempts in eight_seeds["careless"].values():
        for result in attempts:
            stored = json.dumps(result.to_dict()).lower()
            for marker in (
                "mutation",
                "wrong_enum",
                "wrong_number",
                "other_record",
                "repeat_write",
                "intends_success",
            ):
                assert marker not in stored


def test_simulated_agent_names_reach_the_runner_as_simulations():
    task = SUITE.tasks[sorted(SUITE.tasks)[0]]
    agent = make_agent("sim:careless", task=task, domain=SUITE.domains[task.domain], seed=0)
    assert agent.name == "sim:careless (simulated persona, not a model)"


def comparable(result):
    """An attempt's record without wall-clock timings."""
    data = result.to_dict()
    data.pop("duration_ms")
    data.pop("phase_ms")
    for message in data["transcript"]["messages"]:
        message.pop("at_ms")
    for call in data["transcript"]["tool_calls"]:
        call.pop("started_ms")
        call.pop("duration_ms")
    return data


def test_simulated_attempt_is_deterministic_for_a_fixed_seed():
    for task_id in sorted(SUITE.tasks)[:4]:
        task = SUITE.tasks[task_id]
        domain = SUITE.domains[task.domain]
        first = run_task(domain, task, agent="sim:explorer", seed=5)
        second = run_task(domain, task, agent="sim:explorer", seed=5)
        assert comparable(first) == comparable(second)


def test_simulated_usage_is_recorded_with_reasoning_for_explorer(eight_seeds):
    explorer = [r.transcript.agent_usage for attempts in eight_seeds["explorer"].values() for r in attempts]
    steady = [r.transcript.agent_usage for attempts in eight_seeds["steady"].values() for r in attempts]
    assert all(u.input_tokens > 0 and u.output_tokens > 0 and u.calls >= 1 for u in explorer + steady)
    assert all(u.reasoning_tokens > 0 for u in explorer)
    assert all(u.reasoning_tokens == 0 for u in steady)


def per_task_table(results):
    rows = []
    for task_id, attempts in sorted(results.items()):
        done = [r for r in attempts if r.status == "done"]
        rows.append((task_id, SUITE.tasks[task_id].domain, len(done), sum(r.verdict == "pass" for r in done)))
    return pd.DataFrame(rows, columns=["task_id", "domain", "n", "c"])


def test_steady_and_explorer_reverse_between_pass_at_n_and_all_n_with_n_20():
    figures = {}
    for persona in ("steady", "explorer"):
        result = campaign_metrics(per_task_table(run(persona, range(20))), n_attempts=20, replicates=500)
        figures[persona] = (result["pass_at_n_observed"]["value"], result["all_n"]["value"])
    assert figures["explorer"][0] > figures["steady"][0]
    assert figures["steady"][1] > figures["explorer"][1]
    assert reversals(figures) == [("explorer", "steady")]
