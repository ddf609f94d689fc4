"""Environment server benchmark: 64 concurrent episodes driven by the golden agent over HTTP on 127.0.0.1.

python3 bench/env_server.py [--concurrency 64] [--episodes 1920] [--workers 2] [--client-processes 4] [--think-ms 0]
Each of the 64 clients owns one kept-alive connection (``EnvClient``) and runs whole episodes with
``rollout`` (reset, steps to done) on tasks drawn from the built-in suite, back to back with no
pause. The clients are spread over a few processes so that their Python work is not serialised
behind one GIL (the latency would then be the client's, not the server's). Step latency is measured
at the client around each HTTP exchange, so it includes HTTP, tool calls and, for the last step,
grading. Reset latency is reported too: under overload the server starts new episodes after the
steps of running ones, so that is where the queueing shows.
Last line: RESULT episodes_per_s=… step_p50_ms=… step_p95_ms=…

``--mcp``: the same over the real ThinkingBox MCP servers (TB_SERVERS_PYTHON; our ThinkingBox-format
tasks outside the benchmark, fixtures/thinkingbox/test_case): 64 concurrent golden episodes, each in
a fresh server process forked from the pre-imported fork server. While all 64 are open the PSS of
the server's whole process tree (shared copy-on-write pages count once) is measured against the
idle tree. A trainer's episode spends most of its time waiting for the model, so by default every
client thinks ``--think-ms`` (750 ms, a small policy generating one tool call) before each step and
sends one tool call per step, as a model does; the 64 episodes are then all open at once, as in
training, their steps spread over the think time (asynchronous rollouts); ``--lockstep`` makes all
64 step at the same moment, as a synchronous batch trainer does; ``--spread episode`` spreads the
first steps over one episode's length instead of one think time, so that episodes end and reset
spread out (the steady state of asynchronous rollouts; by default they stay nearly in phase for the
run's four rounds, and their resets and gradings come in bursts). The clients run in
``--client-processes`` processes, as in the SQLite mode. ``--think-ms 0`` sends all golden
calls in one step with no pause: the server saturated (closed loop), where latency is queueing
(Little's law) rather than service time. CPU per episode
is split between our env server process and the real servers' tree (fork servers and their
children). Step p95 is over every step, the graded (last) one of each episode included; the split is
printed and in the RESULT line too (``mcp_tool_step_p95_ms``, ``mcp_graded_step_p95_ms``). The
warm-up runs each task once, so the env server holds every task's S0/SG snapshots
(``tb_engine.thinkingbox.task_states``) as a trainer's server does after its first pass over the pool.
Last line: RESULT mcp_episodes_per_s=… mcp_reset_p50_ms=… mcp_step_p95_ms=… rss_per_episode_mb=…
think_ms=… mcp_tool_step_p95_ms=… mcp_graded_step_p95_ms=…
Measured figures (with the machine's load) are in docs/training.md, "MCP bench".
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_engine.agents.golden import make_golden_agent  # noqa: E402
from tb_engine.loader import load_builtin_suite  # noqa: E402
from tb_envserver.client import EnvClient, rollout  # noqa: E402

SUITE = load_builtin_suite()
SQLITE_THINK_MS = 0.0  # the SQLite mode's historical figures: the server saturated
MCP_THINK_MS = 750.0  # a small policy generating one tool call (500-1000 ms), as in training


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


def client_process(
    url: str, client_ids: list[int], concurrency: int, episodes: int, think_s: float, go, results
) -> None:
    """Run the episodes of some clients (client k runs episodes k, k + concurrency, …) in threads."""

    def make(task_id: str):
        golden = make_golden_agent(SUITE.tasks[task_id])
        return ThinkingAgent(golden, think_s) if think_s else golden

    collected: dict[str, list] = {"steps": [], "resets": [], "rewards": []}
    lock = threading.Lock()

    def client(k: int) -> None:
        connection = EnvClient(url)
        connection.health()  # connect before the clock starts
        go.wait()
        steps, resets, rewards = [], [], []
        for index in range(k, episodes, concurrency):
            episode = rollout(connection, make, seed=index)
            steps.extend(episode.step_seconds)
            resets.append(episode.reset_seconds)
            rewards.append(episode.reward)
        connection.close()
        with lock:
            collected["steps"] += steps
            collected["resets"] += resets
            collected["rewards"] += rewards

    threads = [threading.Thread(target=client, args=(k,)) for k in client_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put(collected)


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def cpu_seconds(root: int) -> tuple[float, float]:
    """CPU seconds (user + system) so far of ``root`` itself and of everything below it.

    The real servers run in processes forked by the fork servers (children of ``root``) and are
    reaped by them, so a finished server's CPU is in its fork server's cutime/cstime; live ones are
    read directly."""
    tick = os.sysconf("SC_CLK_TCK")
    own = below = 0.0
    for pid in process_tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used = (int(fields[11]) + int(fields[12])) / tick
        reaped = (int(fields[13]) + int(fields[14])) / tick
        if pid == root:
            own += used
        else:
            below += used + reaped
    return own, below


def tree_pss_mb(root: int) -> float:
    """PSS summed over the process tree: a page shared by n processes counts 1/n in each."""
    total_kb = 0
    for pid in process_tree(root):
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024.0


def sorted_without(values: list[float], removed: list[float]) -> list[float]:
    """``values`` minus one occurrence of each of ``removed`` (a multiset difference)."""
    left = Counter(removed)
    kept = []
    for value in values:
        if left[value]:
            left[value] -= 1
        else:
            kept.append(value)
    return kept


def mcp_main(args: argparse.Namespace) -> None:
    """64 concurrent golden episodes on the real ThinkingBox servers (see the module docstring)."""
    from tb_engine.agents.golden import DEFAULT_REPLY
    from tb_engine.training.thinkingbox_suite import read_training_suite

    python = os.environ.get("TB_SERVERS_PYTHON")
    if not python:
        sys.exit("--mcp needs TB_SERVERS_PYTHON (the real ThinkingBox servers' interpreter)")
    shared = ROOT.parent / "shared" / "thinkingbox"
    if not shared.is_dir():
        shared = ROOT.parent.parent / "shared" / "thinkingbox"
    cases = ROOT / "fixtures" / "thinkingbox" / "test_case"
    options = [
        "--thinkingbox-dataset", str(shared / "dataset"),
        "--servers", str(shared / "servers" / "servers.yaml"),
        "--python", python,
        "--test-cases", str(cases),
        "--benchmark-list", str(shared / "releases" / "thinkingbox_bench_v1" / "testlist_thinkingbox_bench_v1.yaml"),
    ]  # fmt: skip
    suite = read_training_suite(
        shared / "dataset", servers=options[3], python=python, test_cases=[cases], benchmark_list=options[-1]
    ).suite
    task_ids = sorted(suite.tasks)
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tb_envserver",
            *options,
            "--port",
            str(port),
            "--max-episodes",
            str(args.concurrency * 2),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    server.stdout.readline()
    url = f"http://127.0.0.1:{port}"
    warm = EnvClient(url)
    graded = []
    for task_id in task_ids:  # start every domain's fork server; warm golden snapshots
        episode = rollout(warm, lambda t: make_golden_agent(suite.tasks[t]), task_id=task_id)
        if episode.reward == 1.0:  # some need a search service (Typesense) this bench does not run
            graded.append(task_id)
    print(f"golden 1.0 on {len(graded)} of {len(task_ids)} tasks; the bench runs those")
    task_ids = graded
    warm.close()
    time.sleep(0.5)
    idle_mb = tree_pss_mb(server.pid)
    # Forked client processes (closures need no pickling); their threads and this one meet at the barriers.
    processes = multiprocessing.get_context("fork")
    all_open = processes.Barrier(args.concurrency + 1, timeout=120)
    measured = processes.Barrier(args.concurrency + 1, timeout=120)
    results = processes.Queue()
    rounds = max(1, args.episodes // args.concurrency)

    think_s = args.think_ms / 1000.0

    def actions(task) -> list[dict]:
        """One tool call per step after a think pause (as a model), or all at once with no pause."""
        calls = [{"name": c.tool, "arguments": dict(c.arguments)} for c in task.golden]
        reply = {"text": task.extra.get("golden_reply") or DEFAULT_REPLY, "done": True}
        if think_s:
            return [{"tool_calls": [call]} for call in calls] + [reply]
        return [{"tool_calls": calls}, reply]

    # --spread episode: the first steps over a whole episode's length, so that episodes end (and the
    # next ones reset) spread out, as in a trainer's steady state of asynchronous rollouts.
    episode_s = think_s * statistics.mean(len(actions(suite.tasks[t])) for t in task_ids)
    spread_s = episode_s if args.spread == "episode" else think_s

    def client(k: int) -> dict[str, list]:
        connection = EnvClient(url)
        connection.health()
        mine_steps, mine_final, mine_first, mine_resets, mine_rewards = [], [], [], [], []
        for index in range(rounds):
            task = suite.tasks[task_ids[(k + index) % len(task_ids)]]
            if think_s and index == 0:
                time.sleep(think_s * k / args.concurrency)  # spread the first resets as a trainer's would be
            started = time.perf_counter()
            episode = connection.reset(task_id=task.id)
            (mine_first if index == 0 else mine_resets).append((time.perf_counter() - started) * 1000.0)
            if index == 0:
                all_open.wait()
                measured.wait()
                if think_s and not args.lockstep:
                    # The barriers released every client at once; spread their steps again, as the
                    # resets were, or every step of the first rounds would meet 63 others.
                    time.sleep(spread_s * k / args.concurrency)
            for action in actions(task):
                time.sleep(think_s)  # the policy generating its next action
                started = time.perf_counter()
                answer = connection.step(episode["episode_id"], **action)
                mine_steps.append((time.perf_counter() - started) * 1000.0)
            mine_final.append(mine_steps[-1])  # the step that grades (geteffects, snapshots, diff)
            mine_rewards.append(answer["reward"])
        connection.close()
        return {
            "steps": mine_steps,
            "final": mine_final,
            "first_resets": mine_first,
            "later_resets": mine_resets,
            "rewards": mine_rewards,
        }

    def client_process(client_ids: list[int]) -> None:
        """Some of the clients, a thread each; what they measured goes back through ``results``."""
        found: list[dict] = []
        threads = [threading.Thread(target=lambda k=k: found.append(client(k))) for k in client_ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results.put(found)

    # The clients' own Python (HTTP, JSON, 64 threads) is spread over processes, as in the SQLite
    # mode: behind one GIL a step's answer would wait for the other clients' work, and the latency
    # measured would partly be the bench's.
    workers = [
        processes.Process(
            target=client_process, args=(list(range(p, args.concurrency, args.client_processes)),)
        )
        for p in range(min(args.client_processes, args.concurrency))
    ]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    cpu_before = cpu_seconds(server.pid)
    all_open.wait()
    open_mb = tree_pss_mb(server.pid)
    measured.wait()
    gathered = [one for _ in workers for one in results.get(timeout=3600)]  # one dict per client
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started

    def merged(key: str) -> list:
        return [v for one in gathered for v in one[key]]

    steps_ms, final_steps_ms = merged("steps"), merged("final")
    first_resets_ms = merged("first_resets")  # the first batch, started together
    later_resets_ms = merged("later_resets")  # steady state: an episode ends, the next one starts
    resets_ms = first_resets_ms + later_resets_ms
    rewards = merged("rewards")
    time.sleep(0.5)  # the last servers exit and are reaped
    cpu_after = cpu_seconds(server.pid)
    server.terminate()
    server.wait(10)
    per_episode = (open_mb - idle_mb) / args.concurrency
    ours_ms, servers_ms = (
        (after - before) * 1000.0 / len(rewards) for before, after in zip(cpu_before, cpu_after)
    )
    print(f"load: {Path('/proc/loadavg').read_text().strip()} ({os.cpu_count()} cores)")
    mode = (
        f"think {args.think_ms:g} ms before each step, one tool call per step"
        if think_s
        else "no think time, all golden calls in one step (saturated)"
    )
    print(
        f"mcp episodes: {len(rewards)} in {elapsed:.2f} s, {args.concurrency} concurrent ({mode}), {len(task_ids)} "
        f"tasks on {len(suite.domains)} real server domains; golden reward 1.0 in {rewards.count(1.0)}"
    )
    print(f"server tree PSS: idle {idle_mb:.0f} MB, {args.concurrency} open {open_mb:.0f} MB")
    print(
        f"resets p50 {percentile(resets_ms, 0.5):.1f} p95 {percentile(resets_ms, 0.95):.1f} ms; steps p50 "
        f"{percentile(steps_ms, 0.5):.1f} p95 {percentile(steps_ms, 0.95):.1f} ms ({len(steps_ms)} steps)"
    )
    print(
        f"grading (last) steps p50 {percentile(final_steps_ms, 0.5):.1f} p95 {percentile(final_steps_ms, 0.95):.1f} ms; "
        f"the other steps p95 {percentile(sorted_without(steps_ms, final_steps_ms), 0.95):.1f} ms "
        f"(step p95 is over all steps: {len(final_steps_ms)} of the {len(steps_ms)} are graded)"
    )
    if later_resets_ms:
        print(
            f"resets of the first {len(first_resets_ms)} episodes (started together) p50 "
            f"{percentile(first_resets_ms, 0.5):.1f} p95 {percentile(first_resets_ms, 0.95):.1f} ms; later "
            f"{len(later_resets_ms)} p50 {percentile(later_resets_ms, 0.5):.1f} p95 "
            f"{percentile(later_resets_ms, 0.95):.1f} ms"
        )
    print(
        f"CPU per episode: env server {ours_ms:.1f} ms, real servers (fork servers + children) {servers_ms:.1f} ms"
    )
    tool_steps_ms = sorted_without(steps_ms, final_steps_ms)
    print(
        f"RESULT mcp_episodes_per_s={len(rewards) / elapsed:.1f} mcp_reset_p50_ms={percentile(resets_ms, 0.5):.1f} "
        f"mcp_step_p95_ms={percentile(steps_ms, 0.95):.1f} rss_per_episode_mb={per_episode:.1f} think_ms={args.think_ms:g} "
        f"mcp_tool_step_p95_ms={percentile(tool_steps_ms, 0.95):.1f} "
        f"mcp_graded_step_p95_ms={percentile(final_steps_ms, 0.95):.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="concurrent episodes (one client and connection each)"
    )
    parser.add_argument("--episodes", type=int, default=None, help="default 1920; 256 with --mcp")
    parser.add_argument(
        "--client-processes", type=int, default=4, help="processes the clients are spread over"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="server processes (python -m tb_envserver --workers)"
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=None,
        help="pause before each agent step, as a policy's generation would (0 = saturate the server); "
        f"default {SQLITE_THINK_MS:g} for the SQLite suites, {MCP_THINK_MS:g} with --mcp",
    )
    parser.add_argument("--mcp", action="store_true", help="the real ThinkingBox MCP servers (see above)")
    parser.add_argument(
        "--lockstep",
        action="store_true",
        help="with --mcp: all clients step at the same moment, as a synchronous batch trainer does "
        "(default: steps spread over the think time, as asynchronous rollouts are)",
    )
    parser.add_argument(
        "--spread",
        choices=("think", "episode"),
        default="think",
        help="with --mcp: after the memory barriers, spread the clients' first steps over one think "
        "time (default; episodes stay nearly in phase, their resets and gradings come in bursts) or "
        "over one episode's length (the steady state of asynchronous rollouts)",
    )
    args = parser.parse_args()
    if args.episodes is None:
        args.episodes = 256 if args.mcp else 1920
    if args.think_ms is None:
        args.think_ms = MCP_THINK_MS if args.mcp else SQLITE_THINK_MS
    if args.mcp:
        mcp_main(args)
        return
    port = free_port()
    # The server runs in its own process(es), as it would next to a trainer.
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tb_envserver",
            "--suite",
            "starter",
            "--port",
            str(port),
            "--max-episodes",
            str(args.concurrency * 2),
            "--workers",
            str(args.workers),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    server.stdout.readline()  # "serving … on http://…" once it listens
    url = f"http://127.0.0.1:{port}"
    think_s = args.think_ms / 1000.0

    # Warm every worker's per-task templates and golden snapshots so the run measures steady state.
    # New connections land on the workers by address hash; an episode id names its worker.
    warmed: set[str] = set()
    while len(warmed) < args.workers:
        warm = EnvClient(url)
        episodes = [
            rollout(warm, lambda t: make_golden_agent(SUITE.tasks[t]), task_id=t) for t in sorted(SUITE.tasks)
        ]
        warm.close()
        warmed.add(episodes[0].episode_id[:2] if args.workers > 1 else "")

    context = multiprocessing.get_context("fork")  # the clients share the loaded suite
    go, results = context.Event(), context.Queue()
    processes = [
        context.Process(
            target=client_process,
            args=(
                url,
                list(range(p, args.concurrency, args.client_processes)),
                args.concurrency,
                args.episodes,
                think_s,
                go,
                results,
            ),
        )
        for p in range(args.client_processes)
    ]
    for process in processes:
        process.start()
    time.sleep(1.0)  # every client connected and waiting
    started = time.perf_counter()
    go.set()
    collected = [results.get() for _ in processes]
    elapsed = time.perf_counter() - started
    for process in processes:
        process.join()
    server.terminate()
    server.wait(10)

    steps_ms = [s * 1000.0 for part in collected for s in part["steps"]]
    resets_ms = [s * 1000.0 for part in collected for s in part["resets"]]
    rewards = [r for part in collected for r in part["rewards"]]
    episodes_per_s = len(rewards) / elapsed
    print(
        f"episodes: {len(rewards)} in {elapsed:.2f} s with {args.concurrency} concurrent clients in {args.client_processes} "
        f"processes, {args.workers} server worker(s) (think {args.think_ms:g} ms); golden reward 1.0 in {rewards.count(1.0)}"
    )
    print(
        f"steps: {len(steps_ms)}  mean {statistics.fmean(steps_ms):.2f} ms  p99 {percentile(steps_ms, 0.99):.2f} ms  max {max(steps_ms):.2f} ms"
    )
    print(
        f"resets: {len(resets_ms)}  p50 {percentile(resets_ms, 0.5):.2f} ms  p95 {percentile(resets_ms, 0.95):.2f} ms"
    )
    if rewards.count(1.0) != len(rewards) or len(rewards) != args.episodes:
        print(
            f"warning: {rewards.count(1.0)} of {args.episodes} golden episodes ended with reward 1.0",
            file=sys.stderr,
        )
    print(
        f"RESULT episodes_per_s={episodes_per_s:.1f} step_p50_ms={percentile(steps_ms, 0.5):.2f} "
        f"step_p95_ms={percentile(steps_ms, 0.95):.2f}"
    )


if __name__ == "__main__":
    main()
