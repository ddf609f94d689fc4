"""Fault-plan overhead: attempts/s of the golden agent with a 0%-rate fault plan against no plan.

A fault plan wraps the attempt's backend in ``tb_engine.faults.FaultyBackend``: every tool call
then passes one hash decision (seed, task, attempt, call) and the attempt stores its fault record.
With ``rate=0`` no fault fires, so any difference in attempts/s is the plan's own cost. Two
backends, in this process (the engine, as the worker runs it; no Django, no queue):

* built-in suite: every task of the built-in suite on its SQLite sandbox;
* real ThinkingBox MCP servers: the shared retail and booking tasks (``--mcp-tasks`` of them, first
  by id), each attempt on a server from the engine's pool (fork start), as campaigns run them.

The arms run side by side, alternately: every attempt is run three times in a row — plan off,
0% plan, and plan off again as an A/A control — the order rotated from one attempt to the next,
so load that drifts on the shared machine falls on every arm alike, and the control's "overhead"
shows how much of a figure is noise. ``overhead_*_pct`` (RESULT) = (attempts/s plan off /
attempts/s with the 0% plan - 1) x 100 over summed wall time (positive: the plan costs time).
Printed beside it, each with its A/A control: the median over attempt pairs of (time with / time
without) - 1, and the overhead in this process's CPU time (thread time: the plan's own work without
the scheduler's share; on the real servers it leaves out the server processes' CPU). A figure is
only as good as its control: at load 20 on two cores the controls swing by 10+ points.

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


ARMS = ("off", "on", "control")  # control: plan off again, the A/A pair that shows the noise floor


def compare(label: str, work: list[tuple], rounds: int) -> float:
    """Each attempt three times in a row (plan off, 0% plan, plan off again as an A/A control), the
    order rotated from one attempt to the next, for ``rounds`` passes over ``work``; print the
    figures and return the overhead on summed wall time in %."""
    for domain, task in work:  # warm-up: caches, golden states, server pools
        one_attempt(domain, task, None)
        one_attempt(domain, task, ZERO_PLAN)
    wall = dict.fromkeys(ARMS, 0.0)
    cpu = dict.fromkeys(ARMS, 0.0)
    verdicts: dict[str, dict[str, int]] = {arm: {} for arm in ARMS}
    on_ratios, control_ratios = [], []  # per attempt: wall time of the arm over the plan-off run
    turn = 0
    for _ in range(rounds):
        for domain, task in work:
            turn += 1
            order = ARMS[turn % 3 :] + ARMS[: turn % 3]
            took = {}
            for arm in order:
                seconds, cpu_seconds, verdict = one_attempt(domain, task, ZERO_PLAN if arm == "on" else None)
                took[arm] = seconds
                wall[arm] += seconds
                cpu[arm] += cpu_seconds
                verdicts[arm][verdict] = verdicts[arm].get(verdict, 0) + 1
            on_ratios.append(took["on"] / took["off"])
            control_ratios.append(took["control"] / took["off"])
    attempts = len(work) * rounds
    rate = {arm: attempts / wall[arm] for arm in ARMS}
    paired = (statistics.median(on_ratios) - 1.0) * 100.0
    control = (statistics.median(control_ratios) - 1.0) * 100.0
    print(
        f"{label}: {len(work)} attempts x {rounds} rounds per arm; attempts/s plan off {rate['off']:.1f}, "
        f"0% plan {rate['on']:.1f}, plan off again (control) {rate['control']:.1f}; "
        f"overhead on summed wall time {(rate['off'] / rate['on'] - 1) * 100:+.2f}% "
        f"(control {(rate['off'] / rate['control'] - 1) * 100:+.2f}%); "
        f"median over {len(on_ratios)} attempt pairs {paired:+.2f}% (control {control:+.2f}%); "
        f"this process's CPU time {(cpu['on'] / cpu['off'] - 1) * 100:+.2f}% "
        f"(control {(cpu['control'] / cpu['off'] - 1) * 100:+.2f}%); "
        f"verdicts off {verdicts['off']}, on {verdicts['on']}; load average {load()}",
        flush=True,
    )
    return (rate["off"] / rate["on"] - 1.0) * 100.0


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
