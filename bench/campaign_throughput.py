"""Campaign throughput on PostgreSQL + Redis with real Celery worker processes (issue: campaigns).

Part 1 — golden agent, 507 tasks x 20 = 10,140 attempts (built-in tasks repeated to reach 507),
one Celery worker with 2 prefork processes: sustained attempts/s end to end (dispatch, claim,
engine, storage, summaries), p50/p95 attempt latency (claim -> recorded), database bytes per
attempt.
Part 2 — the OpenAI-compatible agent against a scripted endpoint on 127.0.0.1 answering after
300 ms, 8 model calls per attempt, at 8, 32 and 64 concurrent attempts (--llm-workers thread-pool
worker processes, 4 by default, sharing the level's threads): throughput as a fraction of the
ideal (concurrency / 2.4 s).
Workers are started fresh for each part and level; timing starts once every worker answers a
ping (start-up is not part of the sustained rate) and ends when the campaign is marked done.

Run:  python3 bench/campaign_throughput.py                 # throwaway PostgreSQL + Redis (needs the Debian packages)
      DATABASE_URL=postgres://... CELERY_BROKER_URL=redis://... python3 bench/campaign_throughput.py
      --tasks 507 --repeat 20 --levels 8,32,64 --rounds 5   (defaults)
"""

from __future__ import annotations

import argparse
import functools
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# The scripted model server runs on loopback, which the outbound policy refuses unless listed
# (tb_engine.llm.outbound); worker processes inherit the variable.
os.environ.setdefault("TB_OUTBOUND_ALLOWED_HOSTS", "*,127.0.0.1,localhost,::1")

import run as project_runner  # noqa: E402  (throwaway PostgreSQL / Redis helpers)

CALL_DELAY_S = 0.3
CALLS_PER_ATTEMPT = 8


def services(stack: list) -> tuple[str, str]:
    database_url = os.environ.get("DATABASE_URL", "")
    broker_url = os.environ.get("CELERY_BROKER_URL", "")
    if not database_url.startswith("postgres"):
        postgres = project_runner.ThrowawayPostgres()
        stack.append(postgres)
        database_url = postgres.start()
    if not broker_url.startswith("redis"):
        redis = project_runner.ThrowawayRedis()
        stack.append(redis)
        broker_url = redis.start()
    return database_url, broker_url


def django_on_services(stack: list, scratch: Path):
    """Services (throwaway unless given), Django set up and migrated on them, a bench owner and team.

    Returns ``(env, owner, team)``: ``env`` is what every worker process of the bench gets.
    """
    database_url, broker_url = services(stack)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "DEBUG": "1",
        "TB_DATA_DIR": str(scratch),
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thinkingbox_web.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.core.models import Team

    call_command("migrate", verbosity=0)
    owner, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_superuser": True})
    team, _ = Team.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    return env, owner, team


def start_worker(env: dict, log: Path, *, pool: str, concurrency: int) -> subprocess.Popen:
    # A unique node name per process: several workers run on this one host.
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "thinkingbox_web",
        "worker",
        "--pool",
        pool,
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        "--hostname",
        node_name(log),
        *os.environ.get("BENCH_WORKER_ARGS", "").split(),
    ]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def node_name(log: Path) -> str:
    return f"bench-{log.stem}@{socket.gethostname()}"


def wait_ready(nodes: list[str], timeout: float = 120.0) -> None:
    """Block until every worker answers a ping: start-up is not part of the sustained rate.

    A fixed sleep under-waits on a busy 2-core machine (several workers importing Django and the
    OpenAI SDK at once) and the campaign then starts against half-booted workers.
    """
    from thinkingbox_web.celery import app

    deadline = time.monotonic() + timeout
    waiting = set(nodes)
    while waiting:
        if time.monotonic() > deadline:
            raise SystemExit(f"workers not ready after {timeout:.0f} s: {sorted(waiting)}")
        for reply in app.control.ping(destination=sorted(waiting), timeout=1.0):
            waiting -= set(reply)
    time.sleep(0.5)  # let the pools' first reservations settle


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def wait_done(campaign, timeout: float) -> float:
    """Seconds until the campaign finished (the same wait, with sweeps, that run_campaign --wait uses)."""
    from apps.campaigns.services import campaigns_wait

    started = time.monotonic()
    if not campaigns_wait([campaign.pk], timeout=timeout, sweep_every=15, poll_s=0.2):
        raise SystemExit(f"campaign {campaign.pk} did not finish within {timeout:.0f} s")
    return time.monotonic() - started


def bench_suite(n_tasks: int):
    """A suite of n_tasks built-in tasks (repeated with suffixed ids) that runs on the built-in domains."""
    from apps.suites.models import Domain, Suite, Task
    from apps.suites.services import suite_load_builtin

    starter = suite_load_builtin(name="starter", validate=False)
    suite, _ = Suite.objects.update_or_create(
        name=f"bench-{n_tasks}",
        defaults={
            "version": starter.version,
            "source": Suite.Source.BUILTIN,
            "content_hash": starter.content_hash,
        },
    )
    domains = {}
    for domain in starter.domains.all():
        domains[domain.pk], _ = Domain.objects.update_or_create(
            suite=suite,
            name=domain.name,
            defaults={
                "title": domain.title,
                "policy": domain.policy,
                "spec": {**domain.spec, "builtin_suite": starter.name},
            },
        )
    Task.objects.filter(suite=suite).delete()
    originals = list(starter.tasks.order_by("task_id"))
    rows = []
    for number in range(n_tasks):
        original = originals[number % len(originals)]
        copy = number // len(originals)
        rows.append(
            Task(
                suite=suite,
                domain=domains[original.domain_id],
                task_id=f"{original.task_id}~{copy}",
                title=original.title,
                tags=original.tags,
                content_hash=original.content_hash,
                spec=original.spec,
                validation=original.validation,
            )
        )
    Task.objects.bulk_create(rows)
    return suite


def attempt_latencies_ms(campaign) -> list[float]:
    from apps.attempts.models import Attempt

    pairs = Attempt.objects.filter(campaign=campaign, status="done").values_list("started_at", "finished_at")
    return sorted((end - start).total_seconds() * 1000.0 for start, end in pairs)


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def db_bytes_per_attempt() -> float:
    from django.db import connection

    from apps.attempts.models import Attempt

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size('campaigns_attempt')")
        total = cursor.fetchone()[0]
    return total / max(Attempt.objects.count(), 1)


def timed_campaign(workers: list[subprocess.Popen], logs: list[Path], create, *, timeout: float):
    """Once the workers answer, create and start a campaign and time it to done; stop the workers either way."""
    from apps.campaigns.services import campaign_start

    try:
        wait_ready([node_name(log) for log in logs])
        campaign = create()
        started = time.monotonic()
        campaign_start(campaign=campaign)
        return campaign, time.monotonic() - started + wait_done(campaign, timeout=timeout)
    finally:
        for worker in workers:
            stop(worker)


def part_golden(args, env, owner, team, log_dir: Path) -> dict:
    from apps.agents.models import AgentConfig
    from apps.campaigns.services import campaign_create

    suite = bench_suite(args.tasks)
    agent, _ = AgentConfig.objects.update_or_create(
        name="bench golden", defaults={"kind": AgentConfig.Kind.GOLDEN, "max_concurrency": 64}
    )
    # Two worker processes: one prefork worker with 2 children, or two solo workers (no parent<->child IPC).
    if args.golden_pool == "solo":
        logs = [log_dir / f"golden-worker-{n}.log" for n in range(2)]
        workers = [start_worker(env, log, pool="solo", concurrency=1) for log in logs]
    else:
        logs = [log_dir / "golden-worker.log"]
        workers = [start_worker(env, logs[0], pool="prefork", concurrency=2)]
    campaign, elapsed = timed_campaign(
        workers,
        logs,
        lambda: campaign_create(
            name="bench golden",
            team=team,
            owner=owner,
            agent=agent,
            suite=suite,
            n_attempts=args.repeat,
            window=64,
        ),
        timeout=args.timeout,
    )
    total = args.tasks * args.repeat
    latencies = attempt_latencies_ms(campaign)
    figures = {
        "attempts": total,
        "attempts_per_s": total / elapsed,
        "p50_attempt_ms": percentile(latencies, 0.5),
        "p95_attempt_ms": percentile(latencies, 0.95),
        "db_bytes_per_attempt": db_bytes_per_attempt(),
    }
    print(
        f"golden: {total} attempts in {elapsed:.1f} s = {figures['attempts_per_s']:.1f} attempts/s; "
        f"attempt latency p50 {figures['p50_attempt_ms']:.1f} ms, p95 {figures['p95_attempt_ms']:.1f} ms; "
        f"{figures['db_bytes_per_attempt']:.0f} database bytes per attempt",
        flush=True,
    )
    return figures


def part_llm(args, env, owner, team, log_dir: Path) -> dict[int, float]:
    from apps.agents.models import AgentConfig
    from apps.campaigns.services import campaign_create
    from apps.suites.services import suite_load_builtin

    server_port = project_runner.free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests/support/scripted_openai_server.py"),
            "--port",
            str(server_port),
            "--delay-ms",
            str(int(CALL_DELAY_S * 1000)),
            "--tool-calls",
            str(CALLS_PER_ATTEMPT - 1),
            "--max-seconds",
            "1800",
        ],
        stdout=(log_dir / "scripted-server.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    suite = suite_load_builtin(name="starter", validate=False)
    tasks = list(suite.tasks.order_by("task_id"))
    ideal_latency = CALL_DELAY_S * CALLS_PER_ATTEMPT
    scaling = {}
    try:
        time.sleep(1.0)
        for level in args.levels:
            agent, _ = AgentConfig.objects.update_or_create(
                name=f"bench endpoint x{level}",
                defaults={
                    "kind": AgentConfig.Kind.OPENAI,
                    "model": "bench-model",
                    "max_concurrency": level,
                    "base_url": f"http://127.0.0.1:{server_port}/v1",
                    "parameters": {"max_concurrency": level, "retry": {"timeout_s": 30}},
                },
            )
            attempts = level * args.rounds
            # Exactly level x rounds attempts (no ragged last round): the smallest attempts-per-task
            # that divides the total and needs no more tasks than the suite has.
            per_task = next(
                p for p in range(1, attempts + 1) if attempts % p == 0 and attempts // p <= len(tasks)
            )
            selected = tasks[: attempts // per_task]
            # Several worker processes, each a thread pool: a single process would be GIL-bound.
            processes = min(args.llm_workers, level)
            logs = [log_dir / f"llm-worker-{level}-{n}.log" for n in range(processes)]
            workers = [start_worker(env, log, pool="threads", concurrency=level // processes) for log in logs]
            campaign, elapsed = timed_campaign(
                workers,
                logs,
                functools.partial(
                    campaign_create,
                    name=f"bench endpoint x{level}",
                    team=team,
                    owner=owner,
                    agent=agent,
                    suite=suite,
                    tasks=selected,
                    n_attempts=per_task,
                    window=level,
                ),
                timeout=args.timeout,
            )
            total = len(selected) * per_task
            rate = total / elapsed
            ideal = level / ideal_latency
            scaling[level] = rate / ideal
            latencies = attempt_latencies_ms(campaign)
            print(
                f"endpoint x{level}: {total} attempts in {elapsed:.1f} s = {rate:.2f}/s, ideal {ideal:.2f}/s "
                f"-> {100 * scaling[level]:.0f}% of ideal; attempt latency p50 {percentile(latencies, 0.5):.0f} ms",
                flush=True,
            )
    finally:
        server.terminate()
    return scaling


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=507)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--levels", default="8,32,64")
    parser.add_argument("--rounds", type=int, default=5, help="attempts per level = level x rounds")
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--skip-golden", action="store_true", help="only the endpoint scaling part")
    parser.add_argument(
        "--llm-workers", type=int, default=4, help="worker processes (threads pools) for the endpoint part"
    )
    parser.add_argument(
        "--golden-pool",
        choices=["prefork", "solo"],
        default="prefork",
        help="how the 2 golden worker processes run",
    )
    args = parser.parse_args()
    args.levels = [int(v) for v in args.levels.split(",")]
    stack: list = []
    scratch = Path(tempfile.mkdtemp(prefix="tb-bench-"))
    try:
        env, owner, team = django_on_services(stack, scratch)
        golden = None if args.skip_golden else part_golden(args, env, owner, team, scratch)
        scaling = part_llm(args, env, owner, team, scratch)
    finally:
        for service in reversed(stack):
            service.stop()
    top = max(args.levels)
    figures = (
        ""
        if golden is None
        else (
            f"attempts_per_s={golden['attempts_per_s']:.1f} p50_attempt_ms={golden['p50_attempt_ms']:.1f} "
            f"p95_attempt_ms={golden['p95_attempt_ms']:.1f} db_bytes_per_attempt={golden['db_bytes_per_attempt']:.0f} "
        )
    )
    print(f"RESULT {figures}scaling_at_{top}={scaling[top]:.2f}")


if __name__ == "__main__":
    main()
