"""Fault-plan overhead: attempts/s of the golden agent with a 0%-rate fault plan against no plan.

A fault plan that can fire a fault wraps the attempt's backend in ``tb_engine.faults.FaultyBackend``
(every tool call passes its decision); one that can fire nothing — a 0% rate, no ordinals, the plan
this bench measures — leaves the backend alone and only adds the fault record, written from the
transcript (``AttemptSetup.recorded``). With no fault firing, any difference in attempts/s is the
plan's own cost. Two backends, in this process (the engine, as the worker runs it; no Django, no
queue):

* built-in suite: every task of the built-in suite on its SQLite sandbox;
* real ThinkingBox MCP servers: the shared retail and booking tasks (``--mcp-tasks`` of them, first
  by id), each attempt on a server from the engine's pool (fork start), as campaigns run them.

The arms run side by side, interleaved: each attempt is run once in every arm in a row — plan off,
0% plan, and plan off again as an A/A control (and, with ``--armed``, a plan armed on every call
that fires nothing: FaultyBackend's own cost) — the arms' order rotated from one attempt and one
round to the next, and the whole list is gone over ``--rounds`` times. Load that drifts on the
shared machine thus falls on every arm alike. ``overhead_*_pct`` (RESULT) = (the sum over attempts
of each attempt's median time over the rounds with the 0% plan / the same with the plan off - 1) x
100 (positive: the plan costs time): a round in which other work on the machine stalled an attempt
does not weigh in. The control arm's same figure, printed beside it, shows how much of such a
figure is noise. Also printed, for each arm: the same with each attempt's fastest time, the median
over rounds of the round's ratio with its spread, the overhead on summed wall time, and in this
thread's CPU time (the plan's own work without the scheduler's share; on the real servers it
leaves out the server processes' CPU). The collector is frozen after the warm-up so a full
collection of the suite's objects is not charged to whichever arm it lands in.

Goal: overhead <= 5% on each backend (issue 28).

Run:  python3 bench/fault_injection.py [--rounds 20] [--repeat 5] [--mcp-rounds 10] [--mcp-tasks 40] [--armed]
(with the project's .venv python; TB_SERVERS_PYTHON names the servers' interpreter, else the
cached venv is used, else the MCP part is skipped and reported so.)
"""

from __future__ import annotations

import argparse
import gc
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

# A plan that applies to every call and never fires: what the RESULT measures (issue 28). It can fire
# nothing, so the attempt runs on its own backend and only its record is added (AttemptSetup.recorded).
ZERO_PLAN = FaultPlan(kinds=(ERROR_AFTER_COMMIT,), rate=0.0, tools="all", seed=1)
# A plan armed on every call whose one ordinal no attempt reaches: each call goes through
# FaultyBackend's decision and nothing fires — the cost a campaign with a low rate pays on the calls
# its draws spare. Printed for information (--armed), not in the RESULT line.
ARMED_PLAN = FaultPlan(kinds=(ERROR_AFTER_COMMIT,), at_calls=(10_000,), tools="all", seed=1)
MCP_DOMAINS = ("sandbox_external_retail", "external_booking_v1")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


def one_attempt(domain, task, plan: FaultPlan | None) -> tuple[float, float, str]:
    """One golden attempt (no judge): wall and this thread's CPU seconds, and its verdict."""
    wall, cpu = time.perf_counter(), time.thread_time()
    result = AttemptSetup.from_config(domain, task, agent="golden", judge=None, faults=plan).run()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    if plan is not None and result.extra.get("faults", {}).get("fired"):
        raise SystemExit(f"a plan that must not fire fired on {task.id}")  # the bench would measure faults
    return wall, cpu, result.verdict or result.status


# control: plan off again, the A/A arm that shows the noise floor of the same measurement.
ARM_PLANS: dict[str, FaultPlan | None] = {"off": None, "on": ZERO_PLAN, "control": None, "armed": ARMED_PLAN}


def _pct(ratio: float) -> float:
    return (ratio - 1.0) * 100.0


def compare(label: str, work: list[tuple], rounds: int, *, armed: bool) -> float:
    """Run every attempt of ``work`` once per arm, the arms side by side (one attempt in every arm,
    then the next attempt, the arms' order rotated from one attempt and one round to the next),
    ``rounds`` times over; print the figures and return the overhead in % (see ``typical``)."""
    arms = [arm for arm in ARM_PLANS if armed or arm != "armed"]
    for domain, task in work:  # warm-up: caches, golden states, server pools
        for arm in arms:
            one_attempt(domain, task, ARM_PLANS[arm])
    # The long-lived objects (suite, caches, pools) are left out of the collector's passes: a full
    # collection landing in one arm's attempt would be charged to that arm alone.
    gc.collect()
    gc.freeze()
    # seconds[arm][position] = the wall time of that attempt in each round
    seconds: dict[str, list[list[float]]] = {arm: [[] for _ in work] for arm in arms}
    cpu = dict.fromkeys(arms, 0.0)
    verdicts: dict[str, dict[str, int]] = {arm: {} for arm in arms}
    for round_index in range(rounds):
        for position, (domain, task) in enumerate(work):
            turn = (position + round_index) % len(arms)
            for arm in arms[turn:] + arms[:turn]:
                wall, cpu_seconds, verdict = one_attempt(domain, task, ARM_PLANS[arm])
                seconds[arm][position].append(wall)
                cpu[arm] += cpu_seconds
                verdicts[arm][verdict] = verdicts[arm].get(verdict, 0) + 1
    gc.unfreeze()

    def typical(arm: str, pick=statistics.median) -> float:
        # Each attempt's time over its rounds is taken at its median — a round in which the machine's
        # other work stalled it does not count — and the medians are summed over the attempts.
        return sum(pick(times) for times in seconds[arm])

    def round_ratio(arm: str) -> list[float]:
        return [
            sum(times[r] for times in seconds[arm]) / sum(times[r] for times in seconds["off"])
            for r in range(rounds)
        ]

    total = {arm: sum(map(sum, seconds[arm])) for arm in arms}
    rate = {arm: len(work) * rounds / total[arm] for arm in arms}

    def figures(arm: str) -> str:
        per_round = sorted(_pct(r) for r in round_ratio(arm))
        return (
            f"median attempt times, summed {_pct(typical(arm) / typical('off')):+.2f}%; "
            f"fastest attempt times, summed {_pct(typical(arm, min) / typical('off', min)):+.2f}%; "
            f"median over {rounds} rounds of the round's ratio {_pct(statistics.median(round_ratio(arm))):+.2f}% "
            f"(rounds from {per_round[0]:+.2f}% to {per_round[-1]:+.2f}%); "
            f"summed wall time {_pct(total[arm] / total['off']):+.2f}%; "
            f"this thread's CPU time {_pct(cpu[arm] / cpu['off']):+.2f}%"
        )

    print(
        f"{label}: {len(work)} attempts x {rounds} rounds per arm, arms interleaved attempt by attempt; "
        f"attempts/s " + ", ".join(f"{arm} {rate[arm]:.1f}" for arm in arms) + f"; load average {load()}",
        flush=True,
    )
    print(f"  0% plan vs plan off:            {figures('on')}", flush=True)
    print(f"  control (plan off vs plan off): {figures('control')}", flush=True)
    if armed:
        print(f"  armed plan, nothing fires (FaultyBackend on every call, not in RESULT): {figures('armed')}")
    print("  verdicts: " + "; ".join(f"{arm} {verdicts[arm]}" for arm in arms), flush=True)
    return _pct(typical("on") / typical("off"))


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
    parser.add_argument(
        "--armed",
        action="store_true",
        help="also an armed plan that fires nothing (FaultyBackend's own cost)",
    )
    args = parser.parse_args()
    print(f"machine shared with other sessions; uptime load average at start {load()}", flush=True)
    builtin = compare(
        "built-in suite (SQLite sandboxes)", builtin_work(args.repeat), args.rounds, armed=args.armed
    )
    work = mcp_work(args.mcp_tasks)
    if isinstance(work, str) or not work:
        print(f"real servers: not run ({work or 'no task asked for'})", flush=True)
        mcp = float("nan")
    else:
        from tb_engine.thinkingbox.mcp_pool import close_pools

        try:
            mcp = compare("real ThinkingBox MCP servers", work, args.mcp_rounds, armed=args.armed)
        finally:
            close_pools()
    print(f"uptime load average at end {load()}", flush=True)
    print(f"RESULT overhead_builtin_pct={builtin:.2f} overhead_mcp_pct={mcp:.2f}")


if __name__ == "__main__":
    main()
