"""Fault-plan overhead: attempts/s of the golden agent with a 0%-rate fault plan against no plan.

A fault plan wraps the attempt's backend in ``tb_engine.faults.FaultyBackend``: every tool call
then passes one hash decision (seed, task, attempt, call) and the attempt stores its fault record.
With ``rate=0`` no fault fires, so any difference in attempts/s is the plan's own cost. Two
backends, in this process (the engine, as the worker runs it; no Django, no queue):

* built-in suite: every task of the built-in suite on its SQLite sandbox;
* real ThinkingBox MCP servers: the shared retail and booking tasks (``--mcp-tasks`` of them, first
  by id), each attempt on a server from the engine's pool (fork start), as campaigns run them.

Both arms run side by side, alternately: every attempt is run twice in a row, plan off and plan
on, the order flipped from one attempt to the next (ABBA), so load that drifts on the shared
machine falls on both arms alike. ``overhead_*_pct`` (RESULT) is the median over attempt pairs of
(wall time with the plan / without) - 1, in percent (positive: the plan costs time): on a shared
two-core machine at load 10+ a few scheduler stalls of 100 ms land in one arm or the other and
swing a ratio of sums by tens of percent (a built-in attempt takes ~2 ms), while the median pair
is unmoved by them. Printed beside it: attempts/s per arm and the overhead on summed wall time,
the per-round spread, and the overhead in this process's CPU time (thread time: the plan's own
work without the scheduler's share; on the real servers it leaves out the server processes' CPU,
so it over-states the share there).

Goal: overhead <= 5% on each backend (issue 28).

Run:  python3 bench/fault_injection.py [--rounds 20] [--repeat 5] [--mcp-rounds 10] [--mcp-tasks 40]
(with the project's .venv python; TB_SERVERS_PYTHON names the servers' interpreter, else the
cached venv is used, else the MCP part is skipped and reported so.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_engine.attempt_setup import AttemptSetup  # noqa: E402
from tb_engine.faults import ERROR_AFTER_COMMIT, FaultPlan  # noqa: E402
from tb_engine.loader import load_builtin_suite  # noqa: E402

# A plan that applies to every call and never fires: the FaultyBackend path is taken on each call.
ZERO_PLAN = FaultPlan(kinds=(ERROR_AFTER_COMMIT,), rate=0.0, tools="all", seed=1)
MCP_DOMAINS = ("sandbox_external_retail", "external_booking_v1")


def load() -> str:
    return os.getloadavg().__repr__()


def one_attempt(domain, task, plan: FaultPlan | None) -> tuple[float, float, str]:
    """One golden attempt (no judge): wall and this thread's CPU seconds, and its verdict."""
    wall, cpu = time.perf_counter(), time.thread_time()
    result = AttemptSetup.from_config(domain, task, agent="golden", judge=None, faults=plan).run()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    if plan is not None and result.extra.get("faults", {}).get("fired"):
        raise SystemExit(f"a 0%-rate plan fired on {task.id}")  # the bench would measure faults
    return wall, cpu, result.verdict or result.status


def compare(label: str, work: list[tuple], rounds: int) -> float:
    """Each attempt twice in a row, plan off and plan on, the order flipped every attempt (ABBA), for
    ``rounds`` passes over ``work``; print and return the wall-time overhead in %."""
    for domain, task in work:  # warm-up: caches, golden states, server pools
        one_attempt(domain, task, None)
        one_attempt(domain, task, ZERO_PLAN)
    wall = {"off": 0.0, "on": 0.0}
    cpu = {"off": 0.0, "on": 0.0}
    verdicts: dict[str, dict[str, int]] = {"off": {}, "on": {}}
    per_round = []
    pair_ratios = []  # per attempt pair: wall time with the plan over wall time without
    flip = False
    for _ in range(rounds):
        took = {"off": 0.0, "on": 0.0}
        for domain, task in work:
            flip = not flip
            pair = {}
            for arm in ("off", "on") if flip else ("on", "off"):
                seconds, cpu_seconds, verdict = one_attempt(domain, task, ZERO_PLAN if arm == "on" else None)
                pair[arm] = seconds
                took[arm] += seconds
                cpu[arm] += cpu_seconds
                verdicts[arm][verdict] = verdicts[arm].get(verdict, 0) + 1
            pair_ratios.append(pair["on"] / pair["off"])
        for arm in took:
            wall[arm] += took[arm]
        per_round.append((took["on"] / took["off"] - 1.0) * 100.0)
    attempts = len(work) * rounds
    rate_off, rate_on = attempts / wall["off"], attempts / wall["on"]
    overhead = (rate_off / rate_on - 1.0) * 100.0
    paired = (statistics.median(pair_ratios) - 1.0) * 100.0
    cpu_overhead = (cpu["on"] / cpu["off"] - 1.0) * 100.0
    spread = statistics.stdev(per_round) if len(per_round) > 1 else float("nan")
    print(
        f"{label}: {len(work)} attempts x {rounds} rounds per arm; plan off {rate_off:.1f} attempts/s, "
        f"0% plan {rate_on:.1f} attempts/s -> overhead {overhead:+.2f}% on summed wall time "
        f"(per round: median {statistics.median(per_round):+.2f}%, sd {spread:.2f} pp); "
        f"median over the {len(pair_ratios)} attempt pairs {paired:+.2f}%; "
        f"this process's CPU time {cpu_overhead:+.2f}%; verdicts off {verdicts['off']}, on {verdicts['on']}; "
        f"load average {load()}",
        flush=True,
    )
    return paired


def builtin_work(repeat: int) -> list[tuple]:
    """Every built-in task, the list ``repeat`` times over: one pass must outlast scheduler noise."""
    suite = load_builtin_suite(skip_broken_domains=True)
    return [(suite.domains[task.domain], task) for _, task in sorted(suite.tasks.items())] * repeat


def mcp_work(limit: int) -> list[tuple] | str:
    """The shared retail and booking tasks on the real servers, or why they cannot run."""
    from tb_engine.thinkingbox.dataset import parse_scenario, parse_test_file
    from tests.support.paths import THINKINGBOX_DIR
    from tests.support.servers_venv import ServersUnavailable, servers_python

    try:
        python = str(os.environ.get("TB_SERVERS_PYTHON") or servers_python())
    except ServersUnavailable as exc:
        return str(exc)
    dataset = THINKINGBOX_DIR / "dataset"
    work = []
    for name in MCP_DOMAINS:
        spec = parse_scenario(dataset / "scenario" / f"{name}.yaml")
        mcp = dict(spec.mcp or {})
        # No search service here: the scenario's sources are left out, as the real-server tests do.
        mcp["world_state"] = {k: v for k, v in mcp["world_state"].items() if k != "sources"}
        mcp["launch"] = {
            "command": python,
            "args": ["-m", f"tb_business_ops_servers_202606.mcp_{name}"],
            "env": {"TYPESENSE_API_KEY": "Fake"},
        }
        domain = replace(spec, mcp=mcp)
        tasks = [
            t for path in sorted((dataset / "test_case" / name).glob("*.py")) for t in parse_test_file(path)
        ]
        work.extend((domain, task) for task in sorted(tasks, key=lambda t: t.id))
    # Interleave the domains so a prefix of the list holds both.
    retail = [w for w in work if w[0].name == MCP_DOMAINS[0]]
    booking = [w for w in work if w[0].name == MCP_DOMAINS[1]]
    mixed = [w for pair in zip(retail, booking, strict=False) for w in pair]
    return mixed[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="passes over the built-in suite per arm")
    parser.add_argument("--repeat", type=int, default=5, help="built-in task list copies per pass")
    parser.add_argument("--mcp-rounds", type=int, default=10, help="rounds per arm on the real servers")
    parser.add_argument("--mcp-tasks", type=int, default=40, help="shared retail + booking tasks")
    args = parser.parse_args()
    print(f"machine shared with other sessions; uptime load average at start {load()}", flush=True)
    builtin = compare("built-in suite (SQLite sandboxes)", builtin_work(args.repeat), args.rounds)
    work = mcp_work(args.mcp_tasks)
    if isinstance(work, str):
        print(f"real servers: not run ({work})", flush=True)
        mcp = float("nan")
    else:
        from tb_engine.thinkingbox.mcp_pool import close_pools

        try:
            mcp = compare("real ThinkingBox MCP servers", work, args.mcp_rounds)
        finally:
            close_pools()
    print(f"uptime load average at end {load()}", flush=True)
    print(f"RESULT overhead_builtin_pct={builtin:.2f} overhead_mcp_pct={mcp:.2f}")


if __name__ == "__main__":
    main()
