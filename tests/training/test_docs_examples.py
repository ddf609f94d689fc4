"""The code examples in docs/training.md run as written against a live server on 127.0.0.1, so the
docs cannot rot: the OpenEnv client example solves its task (reward 1.0), the TRL GRPO example trains
2 steps of a tiny random model (built as in test_trl_grpo) with rewards from our environment."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from tb_engine.training import Environment
from tb_envserver import EnvServer
from tests.training.test_trl_grpo import SUITE, tiny_tokenizer, write_pool

DOCS = Path(__file__).resolve().parents[2] / "docs" / "training.md"


def doc_example(name: str) -> str:
    """The python block right after the `<!-- doc-test: NAME -->` marker."""
    blocks = re.findall(rf"<!-- doc-test: {name} -->\n```python\n(.*?)\n```", DOCS.read_text(), re.S)
    assert len(blocks) == 1, f"docs/training.md: expected one block marked doc-test: {name}"
    return blocks[0]


@pytest.fixture
def env_server(monkeypatch):
    def start(task_ids=None) -> EnvServer:
        server = EnvServer(Environment(SUITE, task_ids=task_ids))
        server.start_background()
        started.append(server)
        monkeypatch.setenv("TB_ENV_URL", server.url)
        return server

    started: list[EnvServer] = []
    yield start
    for server in started:
        server.shutdown_all()


def test_examples_are_short():
    assert [len(doc_example(n).splitlines()) <= 30 for n in ("openenv", "grpo")] == [True, True]


def test_openenv_client_example_solves_its_task(env_server, capsys):
    server = env_server()
    namespace: dict = {}
    exec(compile(doc_example("openenv"), "docs/training.md:openenv", "exec"), namespace)
    assert namespace["reward"] == 1.0
    printed = capsys.readouterr().out.splitlines()
    assert "'reply_to_user'" in printed[0] and "'update_ticket'" in printed[0]
    assert (
        printed[1]
        == '{"email": "sarah@example.com", "id": "C-10", "name": "Sarah Martinez", "tier": "standard"}'
    )
    assert printed[2] == "{'missing_effect': 0, 'extra_effect': 0, 'wrong_value': 0}"
    assert httpx.get(f"{server.url}/health").json()["episodes"] == 0  # the socket close ended it


def test_grpo_example_trains_two_steps_with_rewards_from_the_server(env_server, tmp_path, monkeypatch):
    torch.manual_seed(0)
    task_ids = ["retail/ticket_hold_carrier_exception"]
    server = env_server(task_ids)
    monkeypatch.chdir(tmp_path)
    write_pool(tmp_path / "pool.json", task_ids)
    tokenizer = tiny_tokenizer()
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=8192,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    )
    namespace: dict = {"model": model, "tokenizer": tokenizer}
    exec(compile(doc_example("grpo"), "docs/training.md:grpo", "exec"), namespace)
    assert namespace["trainer"].state.global_step == 2
    assert namespace["rewards"] == [0.0, 0.0]  # a random policy never solves it; none dropped
    health = httpx.get(f"{server.url}/health").json()
    assert (health["episodes"], health["finished"]) == (0, 0)
