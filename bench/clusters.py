"""Failure clusters at ThinkingBox-Bench scale on PostgreSQL: signature backfill, grouped triage page, cluster page.

Seeds 20 campaigns x 507 tasks x N = 20 attempts (202,800 attempts) with realistic stored results —
dialogue, tool calls with results, and for failures a diff drawn from each task's own mistake profile
(a few typical mistakes per task, combined, plus a long tail of one-off extra effects, failed checks
and rubrics) — through COPY, with no signatures, as a database from before signatures existed. Then:

1. ``backfill_signatures`` over every stored attempt (the management command's service), timed;
2. the grouped triage page (every visible campaign's clean-looking failures, pages 1-3) through
   Django's test client (middleware, session, templates included), the first load cold (empty cache);
3. cluster pages of the largest clusters.

What the page figures measure: every request is a real GET through Django's test client in this
process. The process first serves the flat queue once (a running server's workers have served
pages before: imports and template compilation are paid there, reported as process_first_ms).
Then the cache is emptied, and the first grouped request (grouped_first_ms) builds the cluster
index from the count and signature tables; the following ones are what a returning user sees: the app's own cache of the index and
of each page's details (keyed by the scope's task-summary stamp, which is recomputed per request, so
they are as fresh as in production), the stamp, review progress and everything else read anew.
Pages 1-3 rotate; cluster pages are drawn at random from the 200 largest clusters.

Run:  python3 bench/clusters.py            # starts a throwaway PostgreSQL cluster
      DATABASE_URL=postgres://... python3 bench/clusters.py   # an empty database you own
Options: --requests 30 (per page), --campaigns 20 (the goal run: 100 = 1,014,000 attempts). backfill_per_s counts the failed attempts signed per second of
the backfill (the passes it skips are not counted). The last line is machine-readable:
RESULT campaigns=… backfill_per_s=… grouped_first_ms=… grouped_p95_ms=… cluster_first_ms=… cluster_p95_ms=…
process_first_ms=… (cluster_first_ms: the first cluster page after the cache was emptied again)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from dashboard_latency import synthetic_transcript  # noqa: E402  (the same stored transcript shape)

CAMPAIGNS, TASKS, N = 20, 507, 20
DOMAINS = {
    "retail": (
        ("tickets", ("status", "priority", "note")),
        ("refunds", ("amount", "method")),
        ("orders", ("status",)),
    ),
    "neobank": (
        ("cards", ("status", "frozen")),
        ("disputes", ("status", "amount")),
        ("transfers", ("amount",)),
    ),
    "travel": (("bookings", ("status", "room")), ("fees", ("amount",)), ("notes", ("text",))),
    "insurance": (
        ("claims", ("status", "deductible")),
        ("payments", ("amount",)),
        ("adjuster_notes", ("category",)),
    ),
    "servicedesk": (
        ("tickets", ("status", "note")),
        ("access_grants", ("role", "status")),
        ("assets", ("condition",)),
    ),
}
TOOLS = ("find_record", "get_details", "update_record", "create_record", "delete_record", "add_note")
STATUSES = ("open", "hold", "solved", "pending", "resolved", "closed")


def start_database() -> tuple[str, object | None]:
    """DATABASE_URL if given (must be PostgreSQL), else a throwaway cluster like run.py's."""
    url = os.environ.get("DATABASE_URL", "")
    if url:
        if not url.startswith(("postgres://", "postgresql://")):
            sys.exit(f"DATABASE_URL must be PostgreSQL for this benchmark, got {url.split(':')[0]}")
        return url, None
    from run import ThrowawayPostgres

    cluster = ThrowawayPostgres()
    return cluster.start(), cluster


def mistake_profile(domain: str, rng: random.Random) -> list[dict]:
    """A task's typical mistakes: 2-4 diff items on its domain's tables, each with its own values."""
    tables = DOMAINS[domain]
    mistakes = []
    for _ in range(rng.randint(2, 4)):
        table, fields = rng.choice(tables)
        kind = rng.choice(("wrong_value", "missing_effect", "extra_effect"))
        whole_row = rng.random() < 0.3
        initial, golden = rng.sample(STATUSES, 2)
        result = initial if kind == "missing_effect" else rng.choice(STATUSES)
        mistakes.append(
            {
                "kind": kind,
                "table": table,
                "field": None if whole_row else rng.choice(fields),
                "initial": None if whole_row and kind == "extra_effect" else initial,
                "result": None if whole_row and kind == "missing_effect" else result,
                "golden": golden if kind != "extra_effect" else initial,
                "tool": rng.choice((2, 3, 4, 5)) if kind != "missing_effect" else None,
            }
        )
    return mistakes


def result_json(
    task_id: str, passed: bool, profile: list[dict], rng: random.Random
) -> tuple[str, int, list, str]:
    """A stored AttemptResult (as the worker writes it): dialogue, tool calls, and a diff for failures."""
    calls = [
        {
            "index": i,
            "id": f"call_{i}",
            "name": TOOLS[i],
            "arguments": {"id": f"R-{rng.randint(1, 999)}"},
            "result": {"status": "ok", "rows": [{"id": f"R-{i}", "status": "open", "note": "x" * 40}]},
            "error": None,
            "read_only": i < 2,
            "changed_state": i >= 2,
            "turn": 1 + i // 2,
            "started_ms": 120.0 * i,
            "duration_ms": 3.5,
        }
        for i in range(len(TOOLS))
    ]
    messages = [{"role": "user", "content": "My order is late and nobody tells me anything. " * 3, "turn": 0}]
    messages += [
        {
            "role": "assistant",
            "content": "",
            "turn": c["turn"],
            "tool_calls": [{"id": c["id"], "name": c["name"]}],
        }
        for c in calls
    ]
    messages.append({"role": "assistant", "content": "I have updated your ticket. " * 4, "turn": 3})
    diff, checks, rubrics = [], [], []
    if not passed:
        chosen = rng.sample(profile, min(len(profile), rng.choice((1, 1, 1, 2, 2, 3))))
        if rng.random() < 0.05:  # the long tail: a one-off extra effect
            table, _ = rng.choice(DOMAINS[task_id.split("/")[0]])
            chosen.append(
                {
                    "kind": "extra_effect",
                    "table": table,
                    "field": None,
                    "initial": None,
                    "result": "x",
                    "golden": None,
                    "tool": rng.randint(2, 5),
                }
            )
        for mistake in chosen:
            diff.append(
                {
                    "kind": mistake["kind"],
                    "table": mistake["table"],
                    "key": str(rng.randint(1, 9999)),
                    "field": mistake["field"],
                    "initial": mistake["initial"],
                    "result": mistake["result"],
                    "golden": mistake["golden"],
                    "written_by": [mistake["tool"]] if mistake["tool"] is not None else [],
                }
            )
        if rng.random() < 0.2:
            checks.append(
                {
                    "kind": "row_equals",
                    "description": "record has the expected status",
                    "passed": False,
                    "detail": "",
                    "forbidden": False,
                    "target": f"{diff[0]['table']}.status",
                }
            )
        if rng.random() < 0.1:
            rubrics.append(
                {
                    "question": "Does the reply explain the policy?",
                    "answer": False,
                    "explanation": "keyword judge",
                }
            )
    categories = sorted(
        {d["kind"] for d in diff}
        | ({"check_failed"} if checks else set())
        | ({"rubric_failed"} if rubrics else set())
    )
    result = {
        "task_id": task_id,
        "task_hash": "0" * 64,
        "status": "done",
        "termination": "agent_done" if rng.random() < 0.85 else "max_turns",
        "verdict": "pass" if passed else "fail",
        "transcript": synthetic_transcript(messages, calls),
        "effects": [],
        "diff": diff,
        "checks": checks,
        "rubrics": rubrics,
        "categories": categories,
        "clean_looking": False,
        "error": "",
        "phase_ms": {"dialogue": 300.0, "grade": 4.0},
        "duration_ms": 320.0,
        "extra": {},
    }
    return json.dumps(result), len(diff), categories, result["termination"]


def seed(rng: random.Random):
    """Suite, tasks, 20 campaigns, 202,800 attempts (COPY, unsigned) and their summaries. Returns the triager."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from apps.agents.models import AgentConfig
    from apps.attempts.models import TaskSummary
    from apps.campaigns.models import Campaign
    from apps.core.models import Team
    from apps.core.services import assign_role
    from apps.suites.models import Domain, Suite, Task

    names = list(DOMAINS)
    with transaction.atomic():
        suite = Suite.objects.create(name="bench", version="1.0", content_hash="b" * 64)
        domains = [Domain.objects.create(suite=suite, name=name, title=name.title()) for name in names]
        tasks = Task.objects.bulk_create(
            Task(
                suite=suite,
                domain=domains[i % 5],
                task_id=f"{names[i % 5]}/task_{i:03d}",
                title=f"Task {i}",
                content_hash=f"{i:064d}",
                spec={"id": f"task_{i:03d}", "query": "Help me. " * 20, "checks": [], "rubrics": []},
            )
            for i in range(TASKS)
        )
        team = Team.objects.create(name="Bench team", slug="bench")
        user = get_user_model().objects.create_user(username="bench", password="bench-pw")
        assign_role(user=user, role="triager")
        team.members.add(user)
        campaigns = []
        for c in range(CAMPAIGNS):
            agent = AgentConfig.objects.create(name=f"bench-agent-{c}", kind="openai", model=f"model-{c % 7}")
            campaign = Campaign.objects.create(
                name=f"Campaign {c:02d}",
                team=team,
                owner=user,
                agent=agent,
                suite=suite,
                n_attempts=N,
                harness_version="bench",
                suite_version="1.0",
                suite_hash="b" * 64,
                status="done",
            )
            Campaign.tasks.through.objects.bulk_create(
                Campaign.tasks.through(campaign=campaign, task=t) for t in tasks
            )
            campaigns.append(campaign)
    profiles = {task.pk: mistake_profile(task.task_id.split("/")[0], rng) for task in tasks}
    now = datetime.now(UTC)
    columns = (
        "campaign_id", "task_id", "index", "status", "termination", "verdict", "categories", "clean_looking",
        "task_hash", "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "eval_tokens",
        "agent_cost", "eval_cost", "tool_calls", "diff_items", "duration_ms",
        "result", "error_detail", "retries", "worker", "finished_at", "provider", "superseded_runs",
    )  # fmt: skip
    summaries, failed = [], 0
    started = time.perf_counter()
    for campaign in campaigns:
        skill = rng.uniform(0.2, 0.9)
        with transaction.atomic(), connection.cursor() as cursor:
            with cursor.cursor.copy(f"COPY campaigns_attempt ({', '.join(columns)}) FROM STDIN") as copy:
                for task in tasks:
                    p = min(max(rng.betavariate(2 * skill + 0.3, 2 * (1 - skill) + 0.3), 0), 1)
                    passed = clean = 0
                    for index in range(N):
                        ok = rng.random() < p
                        body, diff_items, categories, termination = result_json(
                            task.task_id, ok, profiles[task.pk], rng
                        )
                        is_clean = not ok and termination == "agent_done"
                        passed += ok
                        clean += is_clean
                        failed += not ok
                        copy.write_row(
                            (
                                campaign.pk, task.pk, index, "done", termination, "pass" if ok else "fail",
                                json.dumps(categories), is_clean, "0" * 64, 4200, 1800, 350, 120, 960,
                                Decimal("0.0079"), Decimal("0.0029"), len(TOOLS), diff_items, 320.0,
                                body, "", 0, "bench:1", now, "[]", "[]",
                            )
                        )  # fmt: skip
                    summaries.append(
                        TaskSummary(
                            campaign=campaign, task=task, n_done=N, n_pass=passed, n_clean_looking=clean
                        )
                    )
    TaskSummary.objects.bulk_create(summaries, batch_size=2000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(
        f"seeded {CAMPAIGNS} campaigns x {TASKS} tasks x N={N} = {CAMPAIGNS * TASKS * N} attempts "
        f"({failed} failed) in {time.perf_counter() - started:.0f}s"
    )
    return user, failed


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def backfill(failed: int) -> float:
    from django.db import connection

    from apps.attempts.services import attempts_backfill_signatures

    started = time.perf_counter()
    report = attempts_backfill_signatures()
    seconds = time.perf_counter() - started
    assert report.scanned == failed == report.changed, (report, failed)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE campaigns_attempt")
    rate = report.changed / seconds
    print(f"backfill: {report.changed} failed attempts signed in {seconds:.1f}s = {rate:,.0f}/s "
          f"({CAMPAIGNS * TASKS * N / seconds:,.0f} stored attempts/s)")  # fmt: skip
    return rate


def measure(user, requests: int, rng: random.Random) -> dict[str, float]:
    from django.core.cache import cache
    from django.test import Client

    from apps.triage.selectors import QueueFilters, cluster_index

    client = Client()
    client.force_login(user)
    # The process's very first request pays for imports and template compilation, whatever the page.
    started = time.perf_counter()
    assert client.get("/triage/?view=list").status_code == 200
    process_first = (time.perf_counter() - started) * 1000
    cache.clear()
    timings: dict[str, list[float]] = {"grouped": [], "cluster": []}
    for i in range(requests):
        started = time.perf_counter()
        response = client.get(f"/triage/?view=grouped&page={1 + i % 3}")
        timings["grouped"].append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200 and b"data-cluster=" in response.content
    index = cluster_index(user=user, filters=QueueFilters())
    print(
        f"grouped view: {len(index.clusters)} clusters for {index.attempts} clean-looking failures "
        f"({index.ratio:.1f} attempts per row); largest {index.clusters[0].size}: {index.clusters[0].description}"
    )
    largest = [c.signature for c in index.clusters[:200]]
    cache.clear()  # the cluster page's first request cold too
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(f"/triage/clusters/{rng.choice(largest)}/")
        timings["cluster"].append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200 and b"cluster-description" in response.content
    for name, values in timings.items():
        print(
            f"{name:8s} first {values[0]:7.1f} ms  p50 {percentile(values, 0.5):7.1f} ms  "
            f"p95 {percentile(values, 0.95):7.1f} ms  (n={len(values)})"
        )
    print(f"process's first request (the flat queue, before the cache was emptied): {process_first:.1f} ms")
    return {
        "process_first_ms": process_first,
        "grouped_p95_ms": percentile(timings["grouped"], 0.95),
        "grouped_first_ms": timings["grouped"][0],
        "cluster_p95_ms": percentile(timings["cluster"], 0.95),
        "cluster_first_ms": timings["cluster"][0],
    }


def main() -> int:
    global CAMPAIGNS  # the seed and the backfill's per-attempt rate read it
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30, help="requests per page (default 30)")
    parser.add_argument(
        "--campaigns",
        type=int,
        default=CAMPAIGNS,
        help="campaigns of 10,140 attempts (default 20; goal run 100)",
    )
    args = parser.parse_args()
    CAMPAIGNS = args.campaigns
    url, cluster = start_database()
    try:
        os.environ["DATABASE_URL"] = url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thinkingbox_web.settings")
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
        call_command("migrate", verbosity=0)
        rng = random.Random(20251015)
        user, failed = seed(rng)
        rate = backfill(failed)
        figures = measure(user, args.requests, rng)
        print(
            f"RESULT campaigns={CAMPAIGNS} backfill_per_s={rate:.0f} grouped_first_ms={figures['grouped_first_ms']:.1f} "
            f"grouped_p95_ms={figures['grouped_p95_ms']:.1f} cluster_first_ms={figures['cluster_first_ms']:.1f} "
            f"cluster_p95_ms={figures['cluster_p95_ms']:.1f} process_first_ms={figures['process_first_ms']:.1f}"
        )
        return 0
    finally:
        if cluster is not None:
            from django.db import connections

            connections.close_all()
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
