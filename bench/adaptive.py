"""Adaptive campaigns benchmark: leave-one-campaign-out over the simulated skill family.

A 500-task suite derived from the starter suite (``tb_engine.irt.synthetic``: 100 variants per
domain); one full campaign (N = 20, 10,000 attempts) per family persona — 16 seeded simulations,
not models — whose attempt outcomes are each attempt's seeded success draw (``intends_success``;
no sandbox runs, no model calls). For each campaign in turn: calibrate on the other 15, replay it
adaptively from its own stored outcomes with the default options (budget 30% of N x tasks,
target SE 0.005), estimate its full pass@1 and all-N share with 95% intervals, compare with what
its full campaign observed. Also times one calibration on all 16 campaigns (both dimension
choices, as ``calibrate`` does) on this machine.

Goals (issue 16): pass@1 MAE <= 1.0 pp, all-N share MAE <= 2.0 pp, attempts share <= 0.30,
coverage of the 95% intervals >= 0.90 (over both figures of every campaign), calibration
<= 30 s on 2 cores.

    python3 bench/adaptive.py [--tasks 500] [--campaigns 16] [--draws 1000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import pandas as pd

from tb_engine.agents.simulated import FAMILY
from tb_engine.irt import CampaignOutcomes, calibrate, leave_one_out
from tb_engine.irt.synthetic import simulated_outcomes, synthetic_suite


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--campaigns", type=int, default=len(FAMILY))
    parser.add_argument("--repeat", type=int, default=20, help="N of the full campaigns")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--calibrate-only", action="store_true", help="time the calibration, skip the replay")
    args = parser.parse_args()

    suite = synthetic_suite(args.tasks)
    task_ids = tuple(suite.tasks)
    domains = tuple(suite.tasks[t].domain for t in task_ids)
    names = list(FAMILY)[: args.campaigns]
    started = time.perf_counter()
    campaigns = [
        CampaignOutcomes(
            name=name,
            task_ids=task_ids,
            domains=domains,
            outcomes=simulated_outcomes(name, suite, n_attempts=args.repeat, seed=seed).astype(np.float64),
            n_attempts=args.repeat,
        )
        for seed, name in enumerate(names, start=1)
    ]
    print(
        f"{len(campaigns)} simulated campaigns x {len(task_ids)} tasks x N = {args.repeat} "
        f"({len(campaigns) * len(task_ids) * args.repeat} outcomes) in {time.perf_counter() - started:.1f} s"
    )

    cells = pd.concat([c.cells() for c in campaigns], ignore_index=True)
    started, cpu = time.perf_counter(), time.process_time()
    full = calibrate(cells)
    calibrate_s = time.perf_counter() - started
    cpu_s = time.process_time() - cpu
    # The fit is single-threaded numpy: on an idle machine wall time is about the CPU time; on a
    # shared one the wall time also counts the time other processes held the cores.
    load = os.getloadavg()[0]
    print(
        f"calibration on all {len(campaigns)}: {calibrate_s:.1f} s wall, {cpu_s:.1f} s CPU "
        f"(load average {load:.1f} on {os.cpu_count()} cores); {full.dimension_note}"
    )
    print(f"  tasks with negative discrimination: {len(full.negative_discrimination())}")
    if args.calibrate_only:
        print(f"RESULT calibrate_s={calibrate_s:.1f} calibrate_cpu_s={cpu_s:.1f}")
        return

    started = time.perf_counter()
    result = leave_one_out(campaigns, draws=args.draws)
    print(f"leave-one-campaign-out: {time.perf_counter() - started:.0f} s")
    header = f"{'held out':26s} {'pass@1':>7s} {'est':>7s} {'95% interval':>17s} {'all-N':>7s} {'est':>7s} {'95% interval':>17s} {'share':>6s} stop"
    print(header)
    for row in result.rows:
        print(
            f"{row['campaign']:26s} {row['observed_pass_at_1']:7.3f} {row['estimated_pass_at_1']:7.3f} "
            f"[{row['pass_at_1_lo']:.3f}, {row['pass_at_1_hi']:.3f}]{' ' if row['pass_at_1_covered'] else '*'} "
            f"{row['observed_all_n']:7.3f} {row['estimated_all_n']:7.3f} "
            f"[{row['all_n_lo']:.3f}, {row['all_n_hi']:.3f}]{' ' if row['all_n_covered'] else '*'} "
            f"{row['attempts_share']:6.3f} {row['stop']}"
        )
    print("(* = the interval missed the observed figure)")
    seconds = result.calibrate_seconds
    print(
        f"calibrations without one campaign: mean {np.mean(seconds):.1f} s, max {np.max(seconds):.1f} s; "
        f"coverage pass@1 {result.coverage_pass_at_1:.3f}, all-N {result.coverage_all_n:.3f}"
    )
    print(
        f"RESULT pass1_mae_pp={result.pass_at_1_mae_pp:.2f} alln_mae_pp={result.all_n_mae_pp:.2f} "
        f"attempts_share={result.attempts_share:.3f} coverage={result.coverage:.3f} calibrate_s={calibrate_s:.1f} "
        f"calibrate_cpu_s={cpu_s:.1f}"
    )


if __name__ == "__main__":
    main()
