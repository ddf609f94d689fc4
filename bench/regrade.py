"""Re-grading stored attempts without re-running them (issue 29), on PostgreSQL.

Seeds 20 campaigns x 507 tasks x N = 20 attempts (202,800) of *real* stored SQLite-backend
attempts: 507 tasks cycled from the built-in starter suite's domains (each a copy of a starter task
under its own id), each stored result one of a pool the engine really ran for that task (simulated
personas careless, explorer, cautious and steady with several seeds: real effects, diff, checks,
transcript). Then one in four tasks gets a new golden end state (its last golden call dropped) and
``apps.regrade.services.regrade_preview`` re-grades every attempt of the 20 campaigns from what it
stored (SR = S0 + effects, SG from the new definition, S0 and SG computed once per task), writing
the preview verdict versions and the impact report. Timed end to end (reading the results from
PostgreSQL included).

Run:  python3 bench/regrade.py        # starts a throwaway PostgreSQL cluster on a free port
Options: --campaigns 20, --pool 12 (engine runs per task). The machine is shared with other
sessions: the load (``uptime``) is printed beside the figure. Last line:
RESULT regrade_per_s=… (wall clock) regrade_per_cpu_s=… (attempts per CPU-second, re-grading
processes + PostgreSQL) two_core_per_s=… (2 × that: two cores of their own) attempts=… seconds=…
flips=… not_regradable=… workers=… load1=…
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.seeding import (  # noqa: E402
    AttemptRow,
    copy_attempts,
    create_campaigns,
    load,
    setup_django,
    start_database,
    stop_database,
)

CAMPAIGNS, TASKS, N = 20, 507, 20
PERSONAS = ("sim:careless", "sim:explorer", "sim:cautious", "sim:steady")


def own_cpu_s() -> float:
    """CPU seconds of this process and its reaped children (the forked re-grading processes)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def postgres_cpu_s(cluster) -> float:
    """CPU seconds of the throwaway cluster: its postmaster, the backends it reaped, the live ones."""
    if cluster is None:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    postmaster = int((cluster.base / "data" / "postmaster.pid").read_text().split()[0])
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def bench_suite():
    """The 507-task suite: starter tasks cycled under new ids (same domains, same definitions)."""
    from tb_engine.loader import load_builtin_suite

    starter = load_builtin_suite("starter")
    base = list(starter.tasks.values())
    tasks = {}
    for i in range(TASKS):
        task = base[i % len(base)]
        copy = dataclasses.replace(task, id=f"{task.id}#{i:03d}")
        tasks[copy.id] = copy
    return starter, tasks


def result_pool(starter, tasks, pool: int) -> dict[str, list[dict]]:
    """Per task, ``pool`` results the engine really ran (personas x seeds)."""
    from tb_engine.attempt_setup import run_task

    found = {}
    for task_id, task in tasks.items():
        domain = starter.domains[task.domain]
        found[task_id] = [
            run_task(domain, task, agent=PERSONAS[k % len(PERSONAS)], seed=k).to_dict() for k in range(pool)
        ]
    return found


def seed(rng: random.Random, campaigns_wanted: int, pool: int):
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from apps.agents.models import AgentConfig
    from apps.core.models import Team
    from apps.suites.models import Domain, Suite, Task
    from tb_engine.spec_json import domain_to_dict, task_from_dict, task_to_dict

    starter, specs = bench_suite()
    with transaction.atomic():
        suite = Suite.objects.create(
            name="regrade-bench", version="1.0", content_hash="r" * 64, source="builtin"
        )
        domains = {
            name: Domain.objects.create(
                suite=suite, name=name, title=name, spec={**domain_to_dict(spec), "builtin_suite": "starter"}
            )
            for name, spec in starter.domains.items()
        }
        tasks = Task.objects.bulk_create(
            Task(
                suite=suite,
                domain=domains[spec.domain],
                task_id=task_id,
                content_hash=spec.content_hash(),
                spec=task_to_dict(spec),
            )
            for task_id, spec in specs.items()
        )
        team = Team.objects.create(name="Regrade bench", slug="regrade-bench")
        user = get_user_model().objects.create_user(username="regrade-bench", password="bench-pw")
        campaigns = create_campaigns(
            count=campaigns_wanted,
            team=team,
            owner=user,
            suite=suite,
            tasks=tasks,
            n=N,
            agent_for=lambda c: AgentConfig.objects.create(
                name=f"regrade-agent-{c}", kind="simulated", persona="careless"
            ),
            harness_version="tbw-1.0",
            suite_hash="r" * 64,
        )
    # The pool runs the tasks as a worker does: parsed from the stored rows (PostgreSQL's jsonb
    # orders a spec's keys its own way, and a check's description follows that order).
    stored_specs = {task.task_id: task_from_dict(Task.objects.get(pk=task.pk).spec) for task in tasks}
    started = time.perf_counter()
    results = result_pool(starter, stored_specs, pool)
    print(f"engine ran {TASKS * pool} attempts for the pool in {time.perf_counter() - started:.1f}s")
    bodies = {task_id: [json.dumps(r) for r in pool_results] for task_id, pool_results in results.items()}

    def attempts_of(campaign, task) -> list[AttemptRow]:
        rows = []
        for _ in range(N):
            k = rng.randrange(pool)
            stored = results[task.task_id][k]
            rows.append(
                AttemptRow(
                    status=stored["status"],
                    verdict=stored["verdict"] or "",
                    termination=stored["termination"] or "",
                    categories=json.dumps(stored["categories"]),
                    clean_looking=stored["clean_looking"],
                    result=bodies[task.task_id][k],
                    diff_items=len(stored["diff"]),
                    tool_calls=len(stored["transcript"]["tool_calls"]),
                    task_hash=stored["task_hash"],
                )
            )
        return rows

    seconds = copy_attempts(campaigns, tasks, attempts_of)
    print(f"seeded {campaigns_wanted * TASKS * N} attempts in {seconds:.0f}s (load {load()}, shared machine)")
    return team, campaigns, tasks


def change_golden(tasks) -> int:
    """One task in four: its last golden call dropped (a new golden end state)."""
    from apps.suites.models import Task
    from tb_engine.spec_json import task_from_dict

    changed = []
    for task in tasks[::4]:
        spec = dict(task.spec)
        spec["golden"] = spec["golden"][:-1]
        task.spec, task.content_hash = spec, task_from_dict(spec).content_hash()
        changed.append(task)
    Task.objects.bulk_update(changed, ["spec", "content_hash"])
    return len(changed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=CAMPAIGNS)
    parser.add_argument("--pool", type=int, default=12, help="engine runs per task (default 12)")
    parser.add_argument(
        "--workers",
        type=int,
        default=4,
        help="re-grading processes (default 4: each waits on its PostgreSQL backend about half the time, "
        "so four keep two cores busy; 2 gave 1,845/s at load 5, 4 gave 5,025/s)",
    )
    parser.add_argument("--profile", action="store_true", help="print the re-grade's cProfile top functions")
    args = parser.parse_args()
    url, cluster = start_database()
    try:
        setup_django(url)
        team, campaigns, tasks = seed(random.Random(29), args.campaigns, args.pool)
        changed = change_golden(tasks)
        from apps.regrade.services import regrade_preview

        print(f"load before: {load()} (machine shared with other sessions)")
        started, cpu_started, pg_started = time.perf_counter(), own_cpu_s(), postgres_cpu_s(cluster)
        if args.profile:
            import cProfile
            import pstats

            profile = cProfile.Profile()
            run = profile.runcall(regrade_preview, campaign_ids=[c.pk for c in campaigns], team_id=team.pk)
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        else:
            run = regrade_preview(
                campaign_ids=[c.pk for c in campaigns], team_id=team.pk, workers=args.workers
            )
        seconds = time.perf_counter() - started
        cpu = own_cpu_s() - cpu_started
        pg_cpu = postgres_cpu_s(cluster) - pg_started
        attempts = run.regraded + run.not_regradable
        flips = sum(run.report["flips"].values())
        per_s = attempts / seconds
        per_cpu_s = attempts / (cpu + pg_cpu)
        print(
            f"{args.workers} process(es): re-graded {attempts} attempts ({changed} of {TASKS} tasks with a new golden end state) in "
            f"{seconds:.1f}s: {per_s:.0f}/s; {run.report['changed']} gradings changed, {flips} verdict flips, "
            f"{run.not_regradable} not re-gradable; uptime load {load()} (shared machine)"
        )
        print(
            f"CPU: {cpu:.1f}s in the re-grading processes + {pg_cpu:.1f}s in PostgreSQL = "
            f"{attempts / (cpu + pg_cpu):.0f} attempts per CPU-second; two cores of their own would give "
            f"up to {2 * per_cpu_s:.0f}/s (the wall-clock figure above is what a shared machine gave)"
        )
        print(
            f"RESULT regrade_per_s={per_s:.0f} regrade_per_cpu_s={per_cpu_s:.0f} two_core_per_s={2 * per_cpu_s:.0f} attempts={attempts} seconds={seconds:.1f} flips={flips} "
            f"not_regradable={run.not_regradable} workers={args.workers} load1={load()}"
        )
        return 0
    finally:
        stop_database(cluster)


if __name__ == "__main__":
    sys.exit(main())
