"""Environment server benchmark: 64 concurrent episodes driven by the golden agent over HTTP on 127.0.0.1.

python3 bench/env_server.py [--concurrency 64] [--episodes 640]
Each client thread owns one kept-alive connection and runs whole episodes (reset, steps to done)
on tasks drawn from the built-in suite. Step latency is measured at the client, so it includes
HTTP, the runner thread handoff, tool calls and, for the last step, grading.
Last line: RESULT episodes_per_s=… step_p50_ms=… step_p95_ms=…
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_engine.agents.golden import make_golden_agent  # noqa: E402
from tb_engine.envserver.client import EnvClient, rollout  # noqa: E402
from tb_engine.loader import load_builtin_suite  # noqa: E402


class ThinkingAgent:
    """The golden agent with a pause before each step (outside the measured step latency)."""

    name = "golden"

    def __init__(self, agent, think_s: float):
        self.agent, self.think_s = agent, think_s

    def step(self, view):
        time.sleep(self.think_s)
        return self.agent.step(view)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=640)
    parser.add_argument(
        "--think-ms", type=float, default=0.0,
        help="pause before each agent step, as a policy's generation would (0 = saturate the server)",
    )  # fmt: skip
    args = parser.parse_args()
    suite = load_builtin_suite()
    port = free_port()
    # The server runs in its own process, as it would next to a trainer: the client threads here
    # must not share its GIL.
    server = subprocess.Popen(
        [sys.executable, "-m", "tb_engine.envserver", "--suite", "starter", "--port", str(port),
         "--max-episodes", str(args.concurrency * 2)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    server.stdout.readline()  # "serving … on http://…" once it listens
    url = f"http://127.0.0.1:{port}"
    think_s = args.think_ms / 1000.0

    def make(task_id: str):
        golden = make_golden_agent(suite.tasks[task_id])
        return ThinkingAgent(golden, think_s) if think_s else golden

    # Warm the per-task templates and golden snapshots so the run measures steady state.
    warm = EnvClient(url)
    for task_id in sorted(suite.tasks):
        rollout(warm, make, task_id=task_id)
    warm.close()

    step_seconds: list[float] = []
    rewards: list[float] = []
    lock = threading.Lock()
    counter = iter(range(args.episodes))

    def worker() -> None:
        client = EnvClient(url)
        local_steps, local_rewards = [], []
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                break
            episode = rollout(client, make, seed=index)
            local_steps.extend(episode.step_seconds)
            local_rewards.append(episode.reward)
        client.close()
        with lock:
            step_seconds.extend(local_steps)
            rewards.extend(local_rewards)

    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    server.terminate()
    server.wait(10)

    steps_ms = [s * 1000.0 for s in step_seconds]
    episodes_per_s = len(rewards) / elapsed
    print(f"episodes: {len(rewards)} in {elapsed:.2f} s with {args.concurrency} concurrent clients (think {args.think_ms:g} ms); golden reward 1.0 in {rewards.count(1.0)}")
    print(f"steps: {len(steps_ms)}  mean {statistics.fmean(steps_ms):.2f} ms  max {max(steps_ms):.2f} ms")
    if rewards.count(1.0) != len(rewards):
        print("warning: the golden agent did not pass every episode", file=sys.stderr)
    print(
        f"RESULT episodes_per_s={episodes_per_s:.1f} step_p50_ms={percentile(steps_ms, 0.5):.2f} "
        f"step_p95_ms={percentile(steps_ms, 0.95):.2f}"
    )


if __name__ == "__main__":
    main()
