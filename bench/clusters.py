"""Failure clusters at ThinkingBox-Bench scale on PostgreSQL: signature backfill, grouped triage page, cluster page.

Seeds 20 campaigns x 507 tasks x N = 20 attempts (202,800 attempts) with realistic stored results —
dialogue, tool calls with results, and for failures a diff drawn from each task's own mistake profile
(a few typical mistakes per task, combined, plus a long tail of one-off extra effects, failed checks
and rubrics) — through COPY, with no signatures, as a database from before signatures existed. Then:

1. ``backfill_signatures`` over every stored attempt (the management command's service), timed;
2. the team's grouped queue stored as the ``triage.clusters_store`` task does once signatures settle
   (``cluster_indexes_store``: index, first page, campaign distribution), timed as index_store_s;
3. the grouped triage page (every visible campaign's clean-looking failures, pages 1-3) through
   Django's test client (middleware, session, templates included), the first load cold;
4. cluster pages of the largest clusters.

What the page figures measure: every request is a real GET through Django's test client in this
process. The process first serves the flat queue once (a running server's workers have served
pages before: imports and template compilation are paid there, reported as process_first_ms).
Then the shared cache and the process's own figures are emptied — what a fresh server process
meets: only PostgreSQL's rows — and the first grouped request (grouped_first_ms) reads the stored
index; pages 2 and 3 compute their details once (from the count and signature tables) and store
them; the following requests are what a returning user sees: the stamp, review progress and
everything else read anew. Pages 1-3 rotate; cluster pages are drawn at random from the 200
largest clusters.

Seeding is bench/seeding.py (shared with dashboard_latency.py and regrade.py). The machine is
shared with other sessions: the load is printed beside every figure and ends the RESULT line.

Run:  python3 bench/clusters.py            # starts a throwaway PostgreSQL cluster
      DATABASE_URL=postgres://... python3 bench/clusters.py   # an empty database you own
Options: --requests 30 (per page), --campaigns 20 (the goal run: 100 = 1,014,000 attempts).
backfill_per_s counts the failed attempts signed per second of the backfill (the passes it skips
are not counted). The last line is machine-readable:
RESULT campaigns=… backfill_per_s=… index_store_s=… grouped_first_ms=… grouped_p95_ms=…
cluster_first_ms=… cluster_p95_ms=… process_first_ms=… load1=… (cluster_first_ms: the first
cluster page after the caches were emptied again)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.dashboard_latency import synthetic_transcript  # noqa: E402  (the same stored transcript shape)
from bench.seeding import (  # noqa: E402
    AttemptRow,
    copy_attempts,
    create_campaigns,
    load,
    percentile,
    setup_django,
    start_database,
    stop_database,
)

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
    from django.db import transaction

    from apps.agents.models import AgentConfig
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
        campaigns = create_campaigns(
            count=CAMPAIGNS,
            team=team,
            owner=user,
            suite=suite,
            tasks=tasks,
            n=N,
            agent_for=lambda c: AgentConfig.objects.create(
                name=f"bench-agent-{c}", kind="openai", model=f"model-{c % 7}"
            ),
            suite_hash="b" * 64,
        )
    profiles = {task.pk: mistake_profile(task.task_id.split("/")[0], rng) for task in tasks}
    skill: dict[int, float] = {}
    failed = 0

    def attempts_of(campaign, task) -> list[AttemptRow]:
        nonlocal failed
        if campaign.pk not in skill:
            skill[campaign.pk] = rng.uniform(0.2, 0.9)
        mean = skill[campaign.pk]
        p = min(max(rng.betavariate(2 * mean + 0.3, 2 * (1 - mean) + 0.3), 0), 1)
        rows = []
        for _ in range(N):
            ok = rng.random() < p
            body, diff_items, categories, termination = result_json(task.task_id, ok, profiles[task.pk], rng)
            failed += not ok
            rows.append(
                AttemptRow(
                    status="done",
                    verdict="pass" if ok else "fail",
                    termination=termination,
                    categories=json.dumps(categories),
                    clean_looking=not ok and termination == "agent_done",
                    result=body,
                    diff_items=diff_items,
                    tool_calls=len(TOOLS),
                )
            )
        return rows

    seconds = copy_attempts(campaigns, tasks, attempts_of)
    print(
        f"seeded {CAMPAIGNS} campaigns x {TASKS} tasks x N={N} = {CAMPAIGNS * TASKS * N} attempts "
        f"({failed} failed) in {seconds:.0f}s (load {load()}, shared machine)"
    )
    return user, failed


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


def store_indexes() -> float:
    """What a worker does once signatures settle (apps.triage.tasks.clusters_store, sent after a
    campaign's finish and a backfill): the team's default grouped queue stored for every process. Timed."""
    from apps.campaigns.models import Campaign
    from apps.triage.services import cluster_indexes_store

    started = time.perf_counter()
    cluster_indexes_store(campaign_ids=list(Campaign.objects.values_list("pk", flat=True)))
    seconds = time.perf_counter() - started
    print(
        f"stored the team's grouped queue (index, first page, distribution) in {seconds:.1f}s (load {load()})"
    )
    return seconds


def forget_process_state() -> None:
    """What a fresh server process starts with: the shared cache emptied, no figures or indexes in memory."""
    from django.core.cache import cache

    from apps.figures.tables import forget_process_figures

    cache.clear()
    forget_process_figures()


def measure(user, requests: int, rng: random.Random) -> dict[str, float]:
    from django.test import Client

    from apps.triage.selectors import QueueFilters, cluster_index

    client = Client()
    client.force_login(user)
    # The process's very first request pays for imports and template compilation, whatever the page.
    started = time.perf_counter()
    assert client.get("/triage/?view=list").status_code == 200
    process_first = (time.perf_counter() - started) * 1000
    forget_process_state()
    timings: dict[str, list[float]] = {"grouped": [], "cluster": []}
    for i in range(requests):
        started = time.perf_counter()
        response = client.get(f"/triage/?view=grouped&page={1 + i % 3}")
        timings["grouped"].append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200 and b"data-cluster=" in response.content
    slowest = sorted(range(requests), key=lambda i: -timings["grouped"][i])[:4]
    print(
        "slowest grouped requests (request #, page, ms; a page's first request computes its details): "
        + ", ".join(f"#{i} p{1 + i % 3} {timings['grouped'][i]:.0f}" for i in slowest)
    )
    index = cluster_index(user=user, filters=QueueFilters())
    print(
        f"grouped view: {len(index.clusters)} clusters for {index.attempts} clean-looking failures "
        f"({index.ratio:.1f} attempts per row); largest {index.clusters[0].size}: {index.clusters[0].description}"
    )
    largest = [c.signature for c in index.clusters[:200]]
    forget_process_state()  # the cluster page's first request cold too
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(f"/triage/clusters/{rng.choice(largest)}/")
        timings["cluster"].append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200 and b"cluster-description" in response.content
    for name, values in timings.items():
        print(
            f"{name:8s} first {values[0]:7.1f} ms  p50 {percentile(values, 0.5):7.1f} ms  "
            f"p95 {percentile(values, 0.95):7.1f} ms  (n={len(values)})  load {load()}"
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
        setup_django(url)
        rng = random.Random(20251015)
        user, failed = seed(rng)
        rate = backfill(failed)
        store_seconds = store_indexes()
        figures = measure(user, args.requests, rng)
        print(
            f"RESULT campaigns={CAMPAIGNS} backfill_per_s={rate:.0f} index_store_s={store_seconds:.1f} "
            f"grouped_first_ms={figures['grouped_first_ms']:.1f} grouped_p95_ms={figures['grouped_p95_ms']:.1f} "
            f"cluster_first_ms={figures['cluster_first_ms']:.1f} cluster_p95_ms={figures['cluster_p95_ms']:.1f} "
            f"process_first_ms={figures['process_first_ms']:.1f} load1={load()}"
        )
        return 0
    finally:
        stop_database(cluster)


if __name__ == "__main__":
    sys.exit(main())
