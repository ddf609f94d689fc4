"""The training environment server (tb_envserver, started as ``serve_training_env`` does) runs
episodes of an imported ThinkingBox suite on the real servers: a fresh forked server per episode."""

from __future__ import annotations

import json
import shutil
from io import StringIO

import pytest
from django.core.management import call_command

from apps.suites.models import Suite
from apps.training.management.commands.serve_training_env import environment_for_pool
from tb_engine.agents.golden import make_golden_agent
from tb_engine.training.pool import POOL_FORMAT
from tb_envserver.client import EnvClient, rollout
from tb_envserver.server import EnvServer
from tests.support.paths import THINKINGBOX_DIR

RETAIL = "sandbox_external_retail"


@pytest.fixture(autouse=True)
def _close_mcp_pools():
    yield
    from tb_engine.thinkingbox.mcp_pool import close_pools

    close_pools()


@pytest.fixture
def retail_suite(tmp_path, servers_python) -> Suite:
    shared = THINKINGBOX_DIR / "dataset"
    dataset = tmp_path / "dataset"
    (dataset / "scenario").mkdir(parents=True)
    shutil.copy(shared / "scenario" / f"{RETAIL}.yaml", dataset / "scenario")
    shutil.copytree(shared / "test_case" / RETAIL, dataset / "test_case" / RETAIL)
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(dataset),
        "--suite-name",
        "retail-shared",
        "--mcp-command",
        f"{servers_python} -m tb_business_ops_servers_202606.mcp_{{server}}",
        "--mcp-env",
        "TYPESENSE_API_KEY=Fake",
        "--mcp-pool-size",
        "1",
        stdout=StringIO(),
    )
    return Suite.objects.get(name="retail-shared")


@pytest.mark.django_db
def test_env_server_runs_thinkingbox_episodes_on_the_real_servers(retail_suite, tmp_path):
    task_ids = list(retail_suite.tasks.order_by("task_id").values_list("task_id", flat=True)[:2])
    pool = tmp_path / "pool.json"
    pool.write_text(
        json.dumps(
            {
                "format": POOL_FORMAT,
                "suite": {"name": retail_suite.name, "evaluation_only": True},
                "tasks": [{"task_id": task_id} for task_id in task_ids],
            }
        )
    )
    env = environment_for_pool(str(pool), allow_evaluation_only=True)
    server = EnvServer(env)
    server.start_background()
    client = EnvClient(server.url)
    try:
        episodes = [
            rollout(client, lambda task_id: make_golden_agent(env.suite.tasks[task_id]), task_id=task_id)
            for task_id in task_ids
        ]
    finally:
        client.close()
        server.shutdown_all()
    assert [(e.task_id, e.reward) for e in episodes] == [(task_id, 1.0) for task_id in task_ids]
