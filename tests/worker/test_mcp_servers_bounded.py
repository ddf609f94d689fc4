"""After a full ThinkingBox import, a one-domain campaign on 2 prefork workers × 4 runs only that
domain's MCP servers, a bounded number of them, and none survives its worker's SIGKILL (issue 27).

The campaign is started before the workers, so their warm-up at process start (which used to
start a pool for every imported launch config) sees it running.
"""

from __future__ import annotations

import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.agents.services import agent_config_for
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_create, campaign_start
from apps.suites.models import Domain, Suite
from tb_engine.spec_json import domain_from_dict
from tb_engine.thinkingbox.mcp_config import launch_config
from tests.conftest import CeleryWorkerProcess
from tests.thinkingbox.conftest import SHARED

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DOMAIN = "external_booking_v1"
WORKERS, CHILDREN = 2, 4
TASKS, REPEATS = 4, 4  # 16 attempts: every child of both workers gets some
CAMPAIGN_TIMEOUT_S = 120


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def mcp_servers(worker_pids: list[int], modules: set[str]) -> dict[int, str]:
    """The MCP server processes (fork servers, their forked children, spawned servers) under the
    workers, each with the server module it runs."""
    found, stack = {}, list(worker_pids)
    while stack:
        for child in _children(stack.pop()):
            stack.append(child)
            command = _cmdline(child)
            module = next((m for m in modules if m in command), None)
            if module is not None:
                found[child] = module
    return found


@pytest.fixture
def full_import(servers_python) -> Suite:
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(SHARED / "dataset"),
        "--test-list",
        str(SHARED / "releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml"),
        "--servers",
        str(SHARED / "servers/servers.yaml"),
        "--python",
        str(servers_python),
        "--suite-name",
        "tb-full",
        stdout=StringIO(),
    )
    return Suite.objects.get(name="tb-full")


def _module(spec: dict) -> str:
    args = launch_config(domain_from_dict(spec)).args
    return args[args.index("-m") + 1]


def test_one_domain_campaign_runs_only_its_servers_and_none_outlives_its_worker(
    full_import, celery_worker_process, alice, team_a, tmp_path
):
    modules = {d.name: _module(d.spec) for d in Domain.objects.filter(suite=full_import, backend="mcp")}
    # The full import of the shared dataset: servers a worker could start.
    assert len(set(modules.values())) >= 2
    # Tasks without rubrics: their verdict is the state alone (no judge needed).
    tasks = list(
        full_import.tasks.filter(domain__name=DOMAIN, task_id__startswith=f"{DOMAIN}_group1.py:").order_by(
            "task_id"
        )[:TASKS]
    )
    assert len(tasks) == TASKS
    campaign = campaign_create(
        name="one domain",
        team=team_a,
        owner=alice,
        agent=agent_config_for("golden"),
        suite=full_import,
        tasks=tasks,
        n_attempts=REPEATS,
    )
    celery_worker_process.stop()  # only the two workers below consume the queue
    campaign_start(campaign=campaign)
    workers = [
        CeleryWorkerProcess(
            env={**celery_worker_process.env, "TB_MCP_START": "fork"},
            queue=celery_worker_process.queue,
            log_path=tmp_path / f"worker-{n}.log",
            concurrency=CHILDREN,
        )
        for n in range(WORKERS)
    ]
    seen: dict[int, str] = {}
    try:
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + CAMPAIGN_TIMEOUT_S
        while time.monotonic() < deadline:
            seen.update(mcp_servers([w.process.pid for w in workers], set(modules.values())))
            if Campaign.objects.filter(pk=campaign.pk, status="done").exists():
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"campaign not done in {CAMPAIGN_TIMEOUT_S} s:\n{workers[0].log_tail()}")
        standing = mcp_servers([w.process.pid for w in workers], set(modules.values()))
        seen.update(standing)

        for worker in workers:
            worker.kill()  # SIGKILL to the worker and its prefork children
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(pid) for pid in seen):
            time.sleep(0.1)
    finally:
        for worker in workers:
            worker.kill()

    assert set(seen.values()) == {modules[DOMAIN]}  # no other domain's server ever started
    # Per child: its pool's ready servers (2), its fork server, the attempt's own and its replay's.
    assert 0 < len(standing) <= WORKERS * CHILDREN * 5
    assert sorted(pid for pid in seen if _alive(pid)) == []
