"""Several server processes on one port: episode ownership, relays to the owner, the --workers CLI."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tb_engine.agents.golden import make_golden_agent
from tb_engine.loader import load_builtin_suite
from tb_engine.training import Environment
from tb_envserver import EnvServer
from tb_envserver.client import EnvClient, EnvClientError, rollout
from tb_envserver.relay import Peers, episode_owner, worker_prefix
from tb_envserver.server import listening_socket

SUITE = load_builtin_suite()
TASK = "retail/ticket_hold_carrier_exception"
ROOT = Path(__file__).resolve().parents[2]


def _golden(task_id: str):
    return make_golden_agent(SUITE.tasks[task_id])


@pytest.fixture
def two_workers():
    """Two workers as two servers in this process (a worker is an EnvServer with Peers)."""
    private = [listening_socket("127.0.0.1", 0) for _ in range(2)]
    addresses = [sock.getsockname()[:2] for sock in private]
    servers = [
        EnvServer(Environment(SUITE, id_prefix=worker_prefix(i)), peers=Peers(i, addresses, private[i]))
        for i in range(2)
    ]
    for server in servers:
        server.start_background()
    yield servers
    for server in servers:
        server.shutdown_all()


def test_episode_owner_reads_the_worker_index_from_the_id():
    assert [episode_owner(f"{worker_prefix(i)}{'a' * 30}", 3) for i in range(3)] == [0, 1, 2]
    assert [episode_owner(other, 3) for other in ("05" + "a" * 30, "zz" + "a" * 30, "", None, 7)] == [
        None
    ] * 5


def test_envserver_episode_ids_carry_their_owner(two_workers):
    ids = [EnvClient(server.url).reset(task_id=TASK)["episode_id"] for server in two_workers]
    assert [episode_id[:2] for episode_id in ids] == ["00", "01"]
    assert [len(episode_id) for episode_id in ids] == [32, 32]


def test_envserver_steps_reaching_the_wrong_worker_are_relayed_to_the_owner(two_workers):
    owner, other = (EnvClient(server.url) for server in two_workers)
    started = owner.reset(task_id=TASK)
    golden = SUITE.tasks[TASK].golden
    calls = [{"id": f"g{i}", "name": c.tool, "arguments": dict(c.arguments)} for i, c in enumerate(golden)]
    middle = other.step(started["episode_id"], tool_calls=calls)  # worker 1 relays to worker 0
    final = owner.step(
        started["episode_id"], text=SUITE.tasks[TASK].extra.get("golden_reply") or "Done.", done=True
    )
    state = other.state(started["episode_id"])
    with pytest.raises(EnvClientError) as again:
        other.step(started["episode_id"], text="more", done=True)
    assert [m["tool_call_id"] for m in middle["observation"]["messages"]] == [
        f"g{i}" for i in range(len(golden))
    ]
    assert (final["reward"], final["done"]) == (1.0, True)
    assert (state["done"], state["reward"], state["turn"]) == (True, 1.0, 2)
    assert (again.value.status, again.value.message) == (
        409,
        f"episode {started['episode_id']}: already done; call /reset for a new one",
    )


class _ResetHereStepThere:
    """A rollout client that starts episodes through one worker and steps them through another."""

    def __init__(self, here: EnvClient, there: EnvClient):
        self.here, self.there = here, there

    def reset(self, **kwargs):
        return self.here.reset(**kwargs)

    def step(self, episode_id, **kwargs):
        return self.there.step(episode_id, **kwargs)


def test_envserver_whole_rollouts_over_the_wrong_worker_get_their_reward(two_workers):
    client = _ResetHereStepThere(*(EnvClient(server.url) for server in two_workers))
    episodes = [rollout(client, _golden, task_id=task_id) for task_id in sorted(SUITE.tasks)]
    assert {episode.episode_id[:2] for episode in episodes} == {"00"}
    assert [episode.reward for episode in episodes] == [1.0] * len(SUITE.tasks)


def test_envserver_unknown_and_foreign_ids_are_404_everywhere(two_workers):
    client = EnvClient(two_workers[1].url)
    missing = []
    for episode_id in ("00" + "f" * 30, "01" + "f" * 30, "nope"):
        with pytest.raises(EnvClientError) as caught:
            client.state(episode_id)
        missing.append((caught.value.status, caught.value.message))
    assert missing == [
        (404, f"episode {'00' + 'f' * 30}: unknown"),
        (404, f"episode {'01' + 'f' * 30}: unknown"),
        (404, "episode nope: unknown"),
    ]


def test_envserver_health_sums_every_worker(two_workers):
    clients = [EnvClient(server.url) for server in two_workers]
    clients[0].reset(task_id=TASK)
    clients[1].reset(task_id=TASK)
    clients[1].reset(task_id=TASK)
    health = clients[0].health()
    assert (health["episodes"], health["finished"], health["workers"]) == (3, 0, 2)


def test_envserver_relay_to_a_stopped_owner_is_502(two_workers):
    owner, other = (EnvClient(server.url) for server in two_workers)
    started = owner.reset(task_id=TASK)
    two_workers[0].shutdown()
    two_workers[0].server_close()
    with pytest.raises(EnvClientError) as unavailable:
        other.state(started["episode_id"])
    assert unavailable.value.status == 502
    assert unavailable.value.message.startswith("worker 0, which owns this episode, is unavailable:")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers with SO_REUSEPORT: Linux")
def test_envserver_cli_workers_serve_every_connection_and_stop_together():
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tb_envserver", "--port", str(port), "--workers", "2"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert (
            process.stdout.readline().strip()
            == f"serving 56 task(s) of suite starter on http://127.0.0.1:{port}"
        )
        workers = _children(process.pid)
        url = f"http://127.0.0.1:{port}"
        by_owner: dict[str, EnvClient] = {}
        for _ in range(64):  # fresh connections land on the workers by address hash: find one on each
            client = EnvClient(url)
            by_owner.setdefault(client.reset(task_id=TASK)["episode_id"][:2], client)
            if len(by_owner) == 2:
                break
        split = _ResetHereStepThere(by_owner["00"], by_owner["01"])  # every step crosses processes
        rewards = [rollout(split, _golden, seed=seed).reward for seed in range(8)]
        health = EnvClient(url).health()
        process.send_signal(signal.SIGTERM)
        code = process.wait(10)
        time.sleep(0.2)
        alive = [
            pid
            for pid in workers
            if os.path.exists(f"/proc/{pid}") and "Z" not in open(f"/proc/{pid}/stat").read().split()[2]
        ]
    finally:
        if process.poll() is None:
            process.kill()
    assert len(workers) == 2
    assert rewards == [1.0] * 8
    assert (health["workers"], health["finished"]) == (2, 8)
    assert (code, alive) == (0, [])
