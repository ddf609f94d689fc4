"""Engine benchmark: the golden agent over the built-in suite, in one process.

Measures per-attempt engine time (assembly + sandbox + dialogue + snapshot + golden replay + diff
+ grade),
attempts per second, and peak RSS before and after 10,000 attempts. Prints figures; not a test.

    python3 bench/engine.py [--attempts 10000]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tb_engine.attempt_setup import AttemptSetup
from tb_engine.loader import load_builtin_suite


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def one_attempt(domain, task) -> tuple[float, str]:
    """One timed attempt: assembly (golden agent, scripted user, keyword judge) + backend + run + close."""
    started = time.perf_counter()
    result = AttemptSetup.from_config(domain, task, agent="golden").run()
    return (time.perf_counter() - started) * 1000.0, result.verdict or result.status


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=10_000)
    args = parser.parse_args()
    suite = load_builtin_suite(skip_broken_domains=True)
    tasks = [task for _, task in sorted(suite.tasks.items())]
    print(
        f"suite {suite.name} {suite.version}: {len(suite.domains)} domains ({', '.join(sorted(suite.domains))}), {len(tasks)} tasks"
    )
    # Warm-up: one attempt per task builds the templates and the cached golden states.
    for task in tasks:
        one_attempt(suite.domains[task.domain], task)
    rss_start = peak_rss_mb()
    durations, verdicts = [], {}
    wall_started = time.perf_counter()
    for number in range(args.attempts):
        task = tasks[number % len(tasks)]
        elapsed, verdict = one_attempt(suite.domains[task.domain], task)
        durations.append(elapsed)
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
    wall = time.perf_counter() - wall_started
    rss_end = peak_rss_mb()
    median = statistics.median(durations)
    p95 = statistics.quantiles(durations, n=20)[-1]
    print(f"attempts {args.attempts}: verdicts {verdicts}")
    print(f"per attempt: median {median:.3f} ms, p95 {p95:.3f} ms, max {max(durations):.3f} ms")
    print(
        f"RESULT median_attempt_ms={median:.3f} attempts_per_s={args.attempts / wall:.0f} rss_start_mb={rss_start:.1f} rss_end_mb={rss_end:.1f}"
    )


if __name__ == "__main__":
    main()
