"""Our verdict vs the real ThinkingBox servers' hash verdict: six run kinds on the five benchmark domains.

For every task of sandbox_external_retail and external_booking_v1 (the shared test files) and of
sandbox_auto_insurance, sandbox_consulting and sandbox_neobank_support_v1 (our own tasks in
fixtures/thinkingbox/test_case), run golden, do-nothing, skip-last-write, changed-argument,
duplicate-create and unstable-text-edit on the real servers (one fresh process per attempt) and
count, per domain and kind, runs, kinds not applicable to a task, our passes, hash passes and
disagreements. Needs the servers' interpreter: TB_SERVERS_PYTHON.

    TB_SERVERS_PYTHON=/path/to/servers/venv/bin/python python3 bench/thinkingbox_verdicts.py [--per-domain N]

Ends with ``RESULT disagreements=… runs=… not_applicable=… unverified_declarations=… infra_errors=…``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tb_engine.agents.harness_checks import RUN_KINDS
from tb_engine.thinkingbox.dataset import parse_test_file
from tb_engine.thinkingbox.mcp_pool import close_pools
from tests.support.real_servers import DOMAINS, real_domain, task_files
from tests.support.run_kinds import run_kinds, tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-domain", type=int, default=0, help="first N tasks of each domain (0: all)")
    args = parser.parse_args()
    python = os.environ.get("TB_SERVERS_PYTHON")
    if not python:
        print("TB_SERVERS_PYTHON must name the servers' interpreter", file=sys.stderr)
        return 2
    started = time.perf_counter()
    outcomes = []
    try:
        for name in DOMAINS:
            domain = real_domain(name, python)
            tasks = [task for path in task_files(name) for task in parse_test_file(path)]
            if args.per_domain:
                tasks = tasks[: args.per_domain]
            domain_started = time.perf_counter()
            outcomes += run_kinds(domain, tasks, RUN_KINDS)
            print(f"{name}: {len(tasks)} tasks in {time.perf_counter() - domain_started:.0f} s", flush=True)
    finally:
        close_pools()
    table = tally(outcomes)
    print(f"{'domain':28} {'kind':20} {'runs':>5} {'n/a':>4} {'ours':>5} {'hash':>5} {'disagree':>8}")
    for name in DOMAINS:
        for kind in RUN_KINDS:
            c = table.get((name, kind), {})
            print(
                f"{name:28} {kind:20} {c.get('runs', 0):5} {c.get('n/a', 0):4} {c.get('our_pass', 0):5} "
                f"{c.get('hash_pass', 0):5} {c.get('disagree', 0):8}"
            )
    for outcome in outcomes:
        if outcome.disagree or (outcome.applicable and outcome.status != "done"):
            print(f"  {outcome}")
    total = {
        key: sum(c.get(key, 0) for c in table.values())
        for key in ("runs", "n/a", "disagree", "unverified", "infra")
    }
    print(f"elapsed {time.perf_counter() - started:.0f} s")
    print(
        f"RESULT disagreements={total['disagree']} runs={total['runs']} not_applicable={total['n/a']} "
        f"unverified_declarations={total['unverified']} infra_errors={total['infra']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
