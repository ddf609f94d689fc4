"""The 15 shared rubric tasks, golden replay on the real booking server: an LLM judge (served by the
scripted OpenAI-compatible server on 127.0.0.1) passes them; the keyword judge leaves them unjudged,
never failed (SPEC §2)."""

from __future__ import annotations

import pytest

from tb_engine.attempt_setup import AttemptSetup
from tb_engine.thinkingbox.dataset import parse_test_file
from tb_engine.thinkingbox.mcp_pool import close_pools
from tests.support.real_servers import DATASET, real_domain, servers_python
from tests.support.scripted_openai_server import scripted_server_fixture

scripted_server = pytest.fixture(scripted_server_fixture, name="scripted_server")
RUBRIC_FILE = DATASET / "test_case" / "external_booking_v1" / "external_booking_v1_group1_rubrics_yesno.py"


@pytest.fixture(autouse=True, scope="module")
def _close_pools():
    yield
    close_pools()


def test_golden_replay_of_the_rubric_tasks_passes_with_an_llm_judge_and_is_unjudged_with_keywords(
    scripted_server,
):
    python = servers_python()
    domain = real_domain("external_booking_v1", python)
    tasks = parse_test_file(RUBRIC_FILE)
    assert (len(tasks), all(task.rubrics for task in tasks)) == (15, True)
    questions = sum(len(task.rubrics) for task in tasks)
    scripted_server.script(
        "judge-model", [{"text": "yes\nThe final reply satisfies the rubric.", "repeat": questions}]
    )
    llm_judge = {
        "kind": "llm",
        "model": "judge-model",
        "base_url": scripted_server.base_url,
        "api_key_env": "",
    }

    with_llm, with_keywords = [], []
    for task in tasks:
        with_llm.append(AttemptSetup.from_config(domain, task, agent="golden", judge=llm_judge).run())
        with_keywords.append(
            AttemptSetup.from_config(domain, task, agent="golden", judge={"kind": "keyword"}).run()
        )

    assert [(r.task_id, r.status, r.verdict) for r in with_llm] == [(t.id, "done", "pass") for t in tasks]
    assert [(r.task_id, r.status, r.verdict, r.categories) for r in with_keywords] == [
        (t.id, "done", "unjudged", []) for t in tasks
    ]
    assert {rubric.answer for r in with_keywords for rubric in r.rubrics} == {None}
    # Every rubric question went to the judge once, at temperature 0, and the state part passed by hash.
    requests = scripted_server.requests_for("judge-model")
    assert (len(requests), {req.body.get("temperature") for req in requests}) == (questions, {0.0})
    assert all(r.extra["thinkingbox"]["effects"]["external_booking_v1"]["their_hash_pass"] for r in with_llm)
