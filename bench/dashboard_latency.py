"""Server-side latency of the dashboard pages on a ThinkingBox-Bench-sized PostgreSQL database.

Seeds 20 campaigns x 507 tasks x N = 20 attempts (10,140 attempts per campaign, 202,800 in all)
with realistic attempt rows (transcript, diff, checks as JSON) and their per-task summaries, then
times the real views through Django's test client (middleware, session, templates included).

Run:  python3 bench/dashboard_latency.py            # starts a throwaway PostgreSQL cluster
      DATABASE_URL=postgres://... python3 bench/dashboard_latency.py   # an empty database you own
Options: --requests 30 (per page), --campaigns 20 (the goal run: 100 = 1,014,000 attempts),
--seed-only (seed and stop; a later run on the same DATABASE_URL reuses the seeded data).
After seeding, every campaign's figures are stored (apps.figures.services.figures_refresh, as at
the end of a campaign; timed). Per page: first = the first request with this process's caches
emptied — the shared cache and the process's own figures — (what a fresh server process meets:
only what PostgreSQL stores), p95 over --requests. Seeding is bench/seeding.py (shared with
clusters.py and regrade.py).
The last line is machine-readable:
RESULT campaigns=… figures_store_s=… <page>_first_ms=… <page>_p95_ms=… for leaderboard, gap, cost,
domains, tasks, compare, drilldown, campaigns, then load1=… (the machine's load: it is shared)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.seeding import (  # noqa: E402  (after the path)
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
DOMAINS = ("retail", "neobank", "travel", "insurance", "servicedesk")
TAGS = ("refund", "escalation", "lookup", "policy", "multi-step", "cancellation")


def synthetic_transcript(messages: list, calls: list) -> dict:
    """A stored transcript with the benches' fixed usage figures (agent, user simulator, judge)."""
    return {
        "messages": messages,
        "tool_calls": calls,
        "agent_usage": {
            "input_tokens": 4200,
            "cached_input_tokens": 1800,
            "output_tokens": 350,
            "reasoning_tokens": 120,
            "calls": 4,
        },
        "user_usage": {
            "input_tokens": 900,
            "cached_input_tokens": 0,
            "output_tokens": 60,
            "reasoning_tokens": 0,
            "calls": 2,
        },
        "judge_usage": {
            "input_tokens": 0,
            "cached_input_tokens": 0,
            "output_tokens": 0,
            "reasoning_tokens": 0,
            "calls": 0,
        },
    }


def result_json(task_id: str, passed: bool, rng: random.Random) -> tuple[str, int]:
    """A realistic stored AttemptResult: dialogue, tool calls with results, diff for failures."""
    calls = [
        {
            "index": i,
            "id": f"call_{i}",
            "name": name,
            "arguments": {"id": f"R-{rng.randint(1, 999)}"},
            "result": {"status": "ok", "rows": [{"id": f"R-{i}", "status": "open", "note": "x" * 40}]},
            "error": None,
            "read_only": i < 2,
            "changed_state": i >= 2,
            "turn": 1 + i // 2,
            "started_ms": 120.0 * i,
            "duration_ms": 3.5,
        }
        for i, name in enumerate(("find_customer", "get_order", "update_ticket"))
    ]
    messages = [{"role": "user", "content": "My order is late and nobody tells me anything. " * 3, "turn": 0}]
    messages += [
        {
            "role": "assistant",
            "content": "",
            "turn": c["turn"],
            "tool_calls": [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]}],
        }
        for c in calls
    ]
    messages.append({"role": "assistant", "content": "I have updated your ticket. " * 4, "turn": 3})
    diff = (
        []
        if passed
        else [
            {
                "kind": rng.choice(("wrong_value", "missing_effect", "extra_effect")),
                "table": "tickets",
                "key": "20",
                "field": "status",
                "initial": "open",
                "result": "solved",
                "golden": "hold",
                "written_by": [2],
            }
        ]
    )
    result = {
        "task_id": task_id,
        "task_hash": "0" * 64,
        "status": "done",
        "termination": "agent_done",
        "verdict": "pass" if passed else "fail",
        "transcript": synthetic_transcript(messages, calls),
        "effects": [],
        "diff": diff,
        "checks": [
            {
                "kind": "state_match",
                "description": "end state equals golden",
                "passed": passed,
                "detail": "",
                "forbidden": False,
            }
        ],
        "rubrics": [],
        "categories": sorted({d["kind"] for d in diff}),
        "clean_looking": not passed,
        "error": "",
        "phase_ms": {"dialogue": 300.0, "grade": 4.0},
        "duration_ms": 320.0,
        "extra": {},
    }
    return json.dumps(result), len(diff)


def seed(rng: random.Random, campaigns_wanted: int = CAMPAIGNS):
    """Suite, tasks, `campaigns_wanted` campaigns of 10,140 attempts each (COPY) and their summaries.

    Returns the viewer and the campaigns. A database seeded before (`--reuse`) is read, not seeded again.
    """
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from apps.agents.models import AgentConfig, PriceSheet
    from apps.campaigns.models import Campaign
    from apps.core.models import Team
    from apps.core.services import assign_role
    from apps.suites.models import Domain, Suite, Task

    if Suite.objects.filter(name="bench").exists():
        campaigns = list(Campaign.objects.filter(team__slug="bench").order_by("pk"))
        print(f"reusing the seeded database: {len(campaigns)} campaigns")
        return get_user_model().objects.get(username="bench"), campaigns
    with transaction.atomic():
        suite = Suite.objects.create(name="bench", version="1.0", content_hash="b" * 64)
        domains = [
            Domain.objects.create(suite=suite, name=name, title=name.title(), policy="Policy text. " * 50)
            for name in DOMAINS
        ]
        tasks = Task.objects.bulk_create(
            Task(
                suite=suite,
                domain=domains[i % len(domains)],
                task_id=f"{DOMAINS[i % 5]}/task_{i:03d}",
                title=f"Task {i}",
                tags=rng.sample(TAGS, 2),
                content_hash=f"{i:064d}",
                spec={
                    "id": f"task_{i:03d}",
                    "query": "Help me. " * 20,
                    "data_patch": {"tickets": [{"id": str(i), "status": "open"}]},
                    "golden": [{"tool": "update_ticket", "arguments": {"id": str(i)}}],
                },
            )
            for i in range(TASKS)
        )
        team = Team.objects.create(name="Bench team", slug="bench")
        user = get_user_model().objects.create_user(username="bench", password="bench-pw")
        assign_role(user=user, role="viewer")
        team.members.add(user)
        sheet = PriceSheet.objects.create(
            name="bench sheet",
            source="bench",
            effective_date=date(2025, 10, 15),
            prices={"gpt-4o": {"input": "2.5", "cached_input": "1.25", "output": "10"}},
        )
        campaigns = create_campaigns(
            count=campaigns_wanted,
            team=team,
            owner=user,
            suite=suite,
            tasks=tasks,
            n=N,
            agent_for=lambda c: AgentConfig.objects.create(
                name=f"bench-agent-{c}", kind="openai", model="gpt-4o"
            ),
            price_sheet=sheet,
            suite_hash="b" * 64,
        )

    skill: dict[int, float] = {}

    def attempts_of(campaign, task) -> list[AttemptRow]:
        if campaign.pk not in skill:  # drawn when the campaign's first task is written
            skill[campaign.pk] = rng.uniform(0.2, 0.9)
        mean = skill[campaign.pk]
        p = min(max(rng.betavariate(2 * mean + 0.3, 2 * (1 - mean) + 0.3), 0), 1)
        rows = []
        for _ in range(N):
            if rng.random() < 0.004:
                status, verdict, ok = "infra_error", "", False
            else:
                ok = rng.random() < p
                status, verdict = "done", ("pass" if ok else "fail")
            body, diff_items = result_json(task.task_id, ok, rng)
            categories = "[]" if ok or status != "done" else json.dumps(json.loads(body)["categories"])
            rows.append(
                AttemptRow(
                    status=status,
                    verdict=verdict,
                    termination="agent_done" if status == "done" else "",
                    categories=categories,
                    clean_looking=status == "done" and not ok,
                    result=body,
                    diff_items=diff_items,
                    tool_calls=3,
                )
            )
        return rows

    seconds = copy_attempts(campaigns, tasks, attempts_of)
    print(
        f"seeded {campaigns_wanted} campaigns x {TASKS} tasks x N={N} = {campaigns_wanted * TASKS * N} attempts "
        f"in {seconds:.0f}s (load {load()}, shared machine)"
    )
    return user, campaigns


def store_figures(campaigns) -> float:
    """What the system does when a campaign's attempts change (apps.figures.services.figures_refresh,
    run at the end of a campaign and by `manage.py figures_refresh`): per-campaign figures stored.
    Timed; the pages then read the stored rows."""
    from apps.figures.models import StoredFigure
    from apps.figures.services import figures_refresh

    StoredFigure.objects.all().delete()  # a reused database: time the whole computation again
    started = time.perf_counter()
    figures_refresh(campaign_ids=[c.pk for c in campaigns])
    seconds = time.perf_counter() - started
    print(f"stored figures of {len(campaigns)} campaigns in {seconds:.1f} s")
    return seconds


def measure(user, campaigns, requests: int, rng: random.Random) -> dict[str, tuple[float, float]]:
    """Per page (first ms, p95 ms). First: this process's caches emptied (a fresh server process
    that has served the sign-in page), so the page reads only what is stored in PostgreSQL."""
    from django.core.cache import cache
    from django.test import Client

    from apps.attempts.models import Attempt
    from apps.figures.tables import forget_process_figures

    client = Client()
    client.force_login(user)
    attempt_ids = list(Attempt.objects.filter(campaign__in=campaigns[:3]).values_list("id", flat=True)[:2000])
    pages = {
        "leaderboard": lambda i: "/leaderboard/",
        "gap": lambda i: "/gap/",
        "cost": lambda i: "/cost/",
        "domains": lambda i: f"/domains/?a={campaigns[0].pk}&b={campaigns[1].pk}",
        "tasks": lambda i: f"/tasks/?page={1 + i % 5}",
        "compare": lambda i: f"/compare/?a={campaigns[0].pk}&b={campaigns[1].pk}",
        "drilldown": lambda i: f"/attempts/{rng.choice(attempt_ids)}/",
        "campaigns": lambda i: "/campaigns/",
    }
    client.get("/glossary/")  # imports, middleware and the base template: what any served page paid
    figures = {}
    for name, url_for in pages.items():
        cache.clear()
        forget_process_figures()  # and this process's own figures: only what PostgreSQL stores
        timings = []
        for i in range(requests):
            started = time.perf_counter()
            response = client.get(url_for(i))
            timings.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (name, response.status_code)
        figures[name] = (timings[0], percentile(timings, 0.95))
        print(
            f"{name:12s} first {timings[0]:7.1f} ms  p50 {percentile(timings, 0.5):7.1f} ms  "
            f"p95 {figures[name][1]:7.1f} ms  (n={requests})  load {Path('/proc/loadavg').read_text().split()[0]}"
        )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30, help="requests per page (default 30)")
    parser.add_argument(
        "--campaigns",
        type=int,
        default=CAMPAIGNS,
        help="campaigns of 10,140 attempts (default 20; goal run 100)",
    )
    parser.add_argument(
        "--seed-only", action="store_true", help="seed the database and stop (reuse it later)"
    )
    args = parser.parse_args()
    url, cluster = start_database()
    try:
        setup_django(url)
        rng = random.Random(20251015)
        user, campaigns = seed(rng, args.campaigns)
        if args.seed_only:
            return 0
        store_seconds = store_figures(campaigns)
        print(f"load: {Path('/proc/loadavg').read_text().strip()} (shared machine)")
        pages = measure(user, campaigns, args.requests, rng)
        print(
            f"RESULT campaigns={len(campaigns)} figures_store_s={store_seconds:.1f} "
            + " ".join(
                f"{name}_first_ms={first:.1f} {name}_p95_ms={p95:.1f}" for name, (first, p95) in pages.items()
            )
            + f" load1={load()}"
        )
        return 0
    finally:
        stop_database(cluster)


if __name__ == "__main__":
    sys.exit(main())
