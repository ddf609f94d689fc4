"""Attempt-level export throughput and memory: rows/s and peak RSS while streaming CSV and JSONL.

Seeds two campaigns (SMALL and LARGE attempts, bulk_create) into a throwaway SQLite file, or into
DATABASE_URL if set (an empty database you own, SQLite or PostgreSQL), then streams each campaign
through the real view (Django test client, StreamingHttpResponse over stream.attempt_export: raw
cursor chunks formatted column by column) in a fresh subprocess per run, so each run's peak RSS
is its own. Flat memory = the LARGE run's peak is about the SMALL run's although it streams 4x
the rows.

Run:  python3 bench/export_stream.py                 # 50,000 and 200,000 attempts in SQLite
      python3 bench/export_stream.py --small 20000 --large 80000
      DATABASE_URL=postgres://... python3 bench/export_stream.py
The last line is machine-readable: RESULT rows_per_s=… peak_rss_mb=…  (the LARGE CSV run)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TASKS = 200


def _django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thinkingbox_web.settings")
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("SECRET_KEY", "bench-export-stream-not-secret")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    import django

    django.setup()


def seed(small: int, large: int) -> dict:
    """Migrate, then create a team, a viewer, a suite of TASKS tasks and two campaigns of attempts."""
    _django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.agents.models import AgentConfig
    from apps.attempts.models import Attempt
    from apps.campaigns.models import Campaign
    from apps.core.models import Team
    from apps.core.services import assign_role
    from apps.suites.models import Domain, Suite, Task

    call_command("migrate", verbosity=0)
    team = Team.objects.create(name="Bench team", slug="bench-team")
    user = get_user_model().objects.create_user(username="bench", password="bench-pw")
    assign_role(user=user, role="viewer")
    team.members.add(user)
    suite = Suite.objects.create(name="bench", version="1", content_hash="0" * 64)
    domain = Domain.objects.create(suite=suite, name="retail", title="Retail")
    tasks = Task.objects.bulk_create(
        Task(suite=suite, domain=domain, task_id=f"retail/task_{i:04d}", content_hash="0" * 64, spec={})
        for i in range(TASKS)
    )
    agent = AgentConfig.objects.create(name="bench agent", kind="sim", persona="careless")
    ids = {}
    for label, rows in (("small", small), ("large", large)):
        campaign = Campaign.objects.create(
            name=f"bench {label}",
            team=team,
            owner=user,
            agent=agent,
            suite=suite,
            n_attempts=rows // TASKS,
            harness_version="bench",
            suite_version="1",
            suite_hash="0" * 64,
        )
        campaign.tasks.set(tasks)
        n = rows // TASKS
        batch = []
        for position in range(n * TASKS):
            task, index = tasks[position % TASKS], position // TASKS
            passed = position % 3 == 0
            batch.append(
                Attempt(
                    campaign=campaign,
                    task=task,
                    index=index,
                    status="done",
                    verdict="pass" if passed else "fail",
                    termination="agent_done",
                    categories=[] if passed else ["wrong_value"],
                    clean_looking=not passed,
                    input_tokens=4200,
                    cached_input_tokens=1800,
                    output_tokens=350,
                    reasoning_tokens=120,
                    agent_cost="0.01234",
                    tool_calls=3,
                    diff_items=0 if passed else 1,
                    duration_ms=320.5,
                    result={"transcript": {"messages": [{"role": "user", "content": "x" * 400}]}},
                )
            )
            if len(batch) == 5000:
                Attempt.objects.bulk_create(batch)
                batch = []
        Attempt.objects.bulk_create(batch)
        ids[label] = campaign.pk
    return ids


def stream(campaign_id: int, fmt: str) -> dict:
    """Stream one campaign's attempts through the view; rows, seconds and this process's peak RSS."""
    _django()
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    warm = client.get(
        f"/exports/attempts.{fmt}?c={campaign_id}", secure=True
    )  # warm-up: imports, URLs, session
    next(iter(warm.streaming_content))
    warm.close()
    started = time.perf_counter()
    response = client.get(
        f"/exports/attempts.{fmt}?c={campaign_id}", secure=True
    )  # DEBUG=0 redirects plain HTTP
    assert response.status_code == 200 and response.streaming, response.status_code
    lines = 0
    for chunk in response.streaming_content:
        lines += chunk.count(b"\n")
    seconds = time.perf_counter() - started
    rows = lines - (1 if fmt == "csv" else 0)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds, "peak_rss_mb": peak_kb / 1024}


def _child(*args: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bench step {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=50_000)
    parser.add_argument("--large", type=int, default=200_000)
    parser.add_argument("--child-seed", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-stream", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_seed:
        print(json.dumps(seed(*args.child_seed)))
        return
    if args.child_stream:
        print(json.dumps(stream(int(args.child_stream[0]), args.child_stream[1])))
        return

    with tempfile.TemporaryDirectory(prefix="tb-export-bench-") as folder:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TB_DATA_DIR": folder}
        env.setdefault("DATABASE_URL", f"sqlite:///{folder}/bench.sqlite3")
        started = time.perf_counter()
        ids = _child("--child-seed", str(args.small), str(args.large), env=env)
        print(
            f"seeded {args.small:,} + {args.large:,} attempts in {time.perf_counter() - started:.1f} s ({env['DATABASE_URL'].split(':')[0]})"
        )
        results = {}
        for fmt in ("csv", "jsonl"):
            for label in ("small", "large"):
                result = _child("--child-stream", str(ids[label]), fmt, env=env)
                results[(fmt, label)] = result
                print(
                    f"{fmt:5} {label:5} {result['rows']:>9,} rows  {result['seconds']:6.2f} s  {result['rows_per_s']:>9,.0f} rows/s  peak RSS {result['peak_rss_mb']:6.1f} MB"
                )
        large = results[("csv", "large")]
        growth = large["peak_rss_mb"] - results[("csv", "small")]["peak_rss_mb"]
        print(f"peak RSS growth small -> large (4x rows, CSV): {growth:+.1f} MB")
        print(f"RESULT rows_per_s={large['rows_per_s']:.0f} peak_rss_mb={large['peak_rss_mb']:.1f}")


if __name__ == "__main__":
    main()
