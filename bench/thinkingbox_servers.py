"""ThinkingBox's real MCP servers under a real Celery worker: fast start (fork) against cold spawn.

Golden over the shared ThinkingBox tasks of retail and booking (../shared/thinkingbox/dataset:
98 + 119 tasks; the 15 booking tasks with yes/no rubrics are run for their state part like the
others) on the real servers (../shared/thinkingbox/servers, in their own venv:
tests/support/servers_venv.py), through a real ``celery -A thinkingbox_web worker`` on
PostgreSQL + Redis (throwaway ones unless DATABASE_URL / CELERY_BROKER_URL point at them), as
bench/campaign_throughput.py does. Two runs in one invocation, each on a freshly started worker:

* fast start (``TB_MCP_START=fork``): each attempt's server is a fresh child forked from a
  parent that imported the server module once (tb_engine/thinkingbox/mcp_forkserver.py);
* cold spawn (``TB_MCP_START=spawn``): each attempt's server is started from scratch
  (``python -m …``, ~1.2 s of CPU to import), as ThinkingBox's own harness does. Its rate is
  steady from the first attempts, so it runs a subset (``--cold-attempts``) to keep the bench short.

Timing starts once the worker answers a ping and its warm-up settled (``--settle``: the fork
servers import their modules, the pools fill) and ends when the campaign is done; start-up is
not part of either sustained rate. ``attempts_per_s`` and ``cold_attempts_per_s`` are attempts
recorded per second of wall time; ``speedup`` is their ratio.

Env overhead (``env_overhead_p50_ms``, median over the fast run's stored attempts): the time an
attempt spends on the backend itself rather than in the agent or its tool calls — waiting for a
ready server process (the process start and MCP handshake, when the pool had none ready),
``__reserved__init``, listing the tools, and closing the backend (teardown and process exit go
to the background; what counts is the hand-over). Fetching the effects that grade the attempt is
grading, not overhead (the median ``grading_ms`` is printed beside it).

Goals on 2 cores: speedup >= 10, attempts_per_s >= 10, env overhead p50 <= 50 ms. ThinkingBox's
own harness: 1.08 attempts/s on 2 slots, 1.76 s median per attempt.

Run:  python3 bench/thinkingbox_servers.py [--repeat 1] [--cold-attempts 40] [--pool prefork --concurrency 2]
(with the project's .venv python; TB_SERVERS_PYTHON names the servers' interpreter, else the
cached venv is built first.)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from campaign_throughput import (  # noqa: E402  (services and worker helpers shared with that bench)
    django_on_services,
    node_name,
    percentile,
    start_worker,
    stop,
    wait_done,
    wait_ready,
)

DOMAINS = ("sandbox_external_retail", "external_booking_v1")


def shared_dataset(folder: Path) -> Path:
    from tests.support.paths import THINKINGBOX_DIR

    shared = THINKINGBOX_DIR / "dataset"
    (folder / "scenario").mkdir(parents=True)
    for domain in DOMAINS:
        shutil.copy(shared / "scenario" / f"{domain}.yaml", folder / "scenario")
        shutil.copytree(shared / "test_case" / domain, folder / "test_case" / domain)
    return folder


def import_suite(python: Path, dataset: Path, pool_size: int):
    from django.core.management import call_command

    from apps.suites.models import Suite

    call_command(
        "import_thinkingbox",
        "--dataset",
        str(dataset),
        "--suite-name",
        "bench-tb-shared",
        "--mcp-command",
        f"{python} -m tb_business_ops_servers_202606.mcp_{{server}}",
        "--mcp-env",
        "TYPESENSE_API_KEY=Fake",
        "--mcp-pool-size",
        str(pool_size),
        stdout=StringIO(),
    )
    return Suite.objects.get(name="bench-tb-shared")


def timed_run(label: str, args, env: dict, log_dir: Path, create) -> tuple:
    """Start a worker with ``env``, wait until it is ready and settled, run the campaign; stop the worker."""
    from apps.campaigns.services import campaign_start

    log = log_dir / f"{label}-worker.log"
    worker = start_worker(env, log, pool=args.pool, concurrency=args.concurrency)
    try:
        wait_ready([node_name(log)])
        time.sleep(args.settle)
        campaign = create()
        started = time.monotonic()
        campaign_start(campaign=campaign)
        elapsed = time.monotonic() - started + wait_done(campaign, timeout=args.timeout)
    finally:
        stop(worker)
    return campaign, elapsed


def overhead_ms(attempt) -> float | None:
    timings = ((attempt.result or {}).get("extra") or {}).get("backend", {}).get("timings_ms") or {}
    if "init" not in timings:
        return None
    return sum(timings.get(name, 0.0) for name in ("wait", "init", "list_tools", "close"))


def summarise(label: str, campaign, elapsed: float) -> dict:
    from apps.attempts.models import Attempt

    attempts = list(Attempt.objects.filter(campaign=campaign).select_related("task__domain"))
    done = [a for a in attempts if a.status == "done"]
    state_pass = 0
    for attempt in done:
        effects = attempt.result["extra"]["thinkingbox"]["effects"][attempt.task.domain.name]
        state_pass += bool(effects["their_hash_pass"] and effects["our_state_pass"])
    overheads = sorted(v for v in (overhead_ms(a) for a in done) if v is not None)
    grading = sorted(a.result.get("phase_ms", {}).get("snapshot", 0.0) for a in done)
    starts = {a.result["extra"]["backend"]["start"] for a in done}
    parts = {}
    for name in ("wait", "init", "list_tools", "close", "connect"):
        values = sorted(a.result["extra"]["backend"]["timings_ms"].get(name, 0.0) for a in done)
        parts[name] = percentile(values, 0.5) if values else float("nan")
    phases = {}
    for name in ("prepare", "dialogue", "snapshot", "diff", "grade", "record"):
        values = sorted(a.result.get("phase_ms", {}).get(name, 0.0) for a in done)
        phases[name] = percentile(values, 0.5) if values else float("nan")
    durations = sorted(a.duration_ms for a in done)
    figures = {
        "attempts": len(attempts),
        "per_s": len(attempts) / elapsed,
        "infra_errors": sum(a.status == "infra_error" for a in attempts),
        "state_pass": state_pass,
        "overhead_p50": percentile(overheads, 0.5) if overheads else float("nan"),
        "overhead_p95": percentile(overheads, 0.95) if overheads else float("nan"),
        "grading_p50": percentile(grading, 0.5) if grading else float("nan"),
    }
    print(
        f"{label} ({', '.join(sorted(starts))}): {figures['attempts']} attempts in {elapsed:.1f} s = "
        f"{figures['per_s']:.2f} attempts/s; state checks passed {state_pass}/{len(done)}, "
        f"{figures['infra_errors']} infra errors; env overhead p50 {figures['overhead_p50']:.1f} ms, "
        f"p95 {figures['overhead_p95']:.1f} ms; grading (effects fetch) p50 {figures['grading_p50']:.1f} ms",
        flush=True,
    )
    print(
        "  medians, ms: "
        + ", ".join(f"{name} {value:.1f}" for name, value in parts.items())
        + " | phases "
        + ", ".join(f"{name} {value:.1f}" for name, value in phases.items())
        + f" | attempt {percentile(durations, 0.5):.1f}",
        flush=True,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="attempts per task in the fast run")
    parser.add_argument(
        "--cold-attempts", type=int, default=40, help="tasks in the cold-spawn run (1 attempt each)"
    )
    parser.add_argument("--pool", choices=["prefork", "threads"], default="prefork")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--pool-size", type=int, default=2, help="ready server sessions per domain and worker process"
    )
    parser.add_argument(
        "--settle", type=float, default=8.0, help="seconds for the worker's warm-up after it answers"
    )
    parser.add_argument("--timeout", type=float, default=1800.0)
    args = parser.parse_args()

    from tests.support.servers_venv import ServersUnavailable, servers_python

    try:
        python = servers_python()
    except ServersUnavailable as exc:
        raise SystemExit(f"the real servers are needed: {exc}") from None
    stack: list = []
    scratch = Path(tempfile.mkdtemp(prefix="tb-bench-servers-"))
    try:
        env, owner, team = django_on_services(stack, scratch)
        from apps.agents.services import agent_config_for
        from apps.campaigns.services import campaign_create

        suite = import_suite(python, shared_dataset(scratch / "dataset"), args.pool_size)
        tasks = list(suite.tasks.order_by("task_id"))
        golden = agent_config_for("golden")
        print(
            f"{len(tasks)} shared tasks; worker: {args.pool} x{args.concurrency}; servers: {python}",
            flush=True,
        )

        fast_campaign, fast_elapsed = timed_run(
            "fast",
            args,
            {**env, "TB_MCP_START": "fork"},
            scratch,
            lambda: campaign_create(
                name="bench fork", team=team, owner=owner, agent=golden, suite=suite, n_attempts=args.repeat
            ),
        )
        fast = summarise("fast start", fast_campaign, fast_elapsed)
        cold_tasks = tasks[:: max(1, len(tasks) // args.cold_attempts)][: args.cold_attempts]
        cold_campaign, cold_elapsed = timed_run(
            "cold",
            args,
            {**env, "TB_MCP_START": "spawn"},
            scratch,
            lambda: campaign_create(
                name="bench spawn",
                team=team,
                owner=owner,
                agent=golden,
                suite=suite,
                tasks=cold_tasks,
                n_attempts=1,
            ),
        )
        cold = summarise("cold spawn", cold_campaign, cold_elapsed)
    finally:
        for service in reversed(stack):
            service.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"RESULT attempts_per_s={fast['per_s']:.2f} cold_attempts_per_s={cold['per_s']:.2f} "
        f"speedup={fast['per_s'] / cold['per_s']:.1f} env_overhead_p50_ms={fast['overhead_p50']:.1f}"
    )


if __name__ == "__main__":
    main()
