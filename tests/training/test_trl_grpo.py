"""A real TRL GRPOTrainer run on CPU: 2 optimisation steps of a tiny randomly initialised causal LM (config and
tokenizer built here, nothing downloaded) with our environment_factory and episode_reward; the rewards it logs
come from our environment server."""

from __future__ import annotations

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"

import httpx
import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen3_chat_template

from tb_engine.loader import load_builtin_suite
from tb_engine.training import Environment
from tb_envserver import EnvServer
from tb_envserver.trl_environment import (
    environment_factories,
    episode_reward,
    tasks_by_domain,
    training_rows,
)

SUITE = load_builtin_suite()
SPECIALS = [
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]
SPECIALS += ["<think>", "</think>", "<|endoftext|>"]


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on the suite's own texts, with Qwen3's chat template (tool calling)."""
    corpus = [task.query for task in SUITE.tasks.values()] + ['{"name": "get_order", "arguments": {}}']
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=qwen3_chat_template,
    )
    from tokenizers import decoders

    tokenizer.backend_tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def write_pool(path, task_ids):
    tasks = [{"task_id": t, "domain": SUITE.tasks[t].domain} for t in task_ids]
    path.write_text(
        json.dumps({"format": "thinkingbox-training-pool/1", "suite": {"name": SUITE.name}, "tasks": tasks})
    )
    return path


def test_grpo_trainer_runs_two_steps_with_our_environment_and_reward(tmp_path):
    torch.manual_seed(0)
    task_ids = [
        "retail/ticket_hold_carrier_exception",
        sorted(t for t in SUITE.tasks if not t.startswith("retail/"))[0],
    ]
    server = EnvServer(Environment(SUITE, task_ids=task_ids))
    server.start_background()
    try:
        rows = training_rows(str(write_pool(tmp_path / "pool.json", task_ids)), repeat=2)
        assert sorted({r["environment"] for r in rows}) == sorted({SUITE.tasks[t].domain for t in task_ids})
        tokenizer = tiny_tokenizer()
        config = Qwen2Config(
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
        model = Qwen2ForCausalLM(config)
        args = GRPOConfig(
            output_dir=str(tmp_path / "out"),
            max_steps=2,
            per_device_train_batch_size=2,
            num_generations=2,
            max_completion_length=12,
            learning_rate=1e-3,
            logging_steps=1,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            seed=0,
        )
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=[episode_reward],
            args=args,
            train_dataset=Dataset.from_list(rows),
            environment_factory=environment_factories(server.url, tasks_by_domain(rows)),
        )
        trainer.train()
        health = httpx.get(f"{server.url}/health").json()
    finally:
        server.shutdown_all()
    logged = [entry for entry in trainer.state.log_history if "rewards/episode_reward/mean" in entry]
    assert len(logged) == 2
    # a random policy never solves a task: the grader's verdict is 0.0 on every rollout, none dropped
    assert [entry["rewards/episode_reward/mean"] for entry in logged] == [0.0, 0.0]
    assert trainer.state.global_step == 2
    assert (health["episodes"], health["finished"]) == (0, 0)  # every episode graded, then closed
