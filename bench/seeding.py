"""The benches' shared seeding: a throwaway (or given) PostgreSQL database, campaigns over one suite's
tasks, and their attempts written by COPY with the per-task summaries counted from the same rows.

Used by bench/dashboard_latency.py, bench/clusters.py and bench/regrade.py: each bench says what a
campaign's agent is and what each attempt stored (``AttemptRow``); this module does the rest the
same way for all of them — one transaction and one COPY per campaign, TaskSummary rows counted from
the rows written (so the figures the pages read always agree with the attempts), then VACUUM ANALYZE.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# What a synthetic attempt spent: the benches' fixed token figures (per attempt).
TOKENS = {
    "input_tokens": 4200,
    "cached_input_tokens": 1800,
    "output_tokens": 350,
    "reasoning_tokens": 120,
    "eval_tokens": 960,
}
AGENT_COST, EVAL_COST = Decimal("0.0079"), Decimal("0.0029")

# campaigns_attempt columns written by COPY. provider and superseded_runs have only a Django-side
# default, which COPY does not apply.
ATTEMPT_COLUMNS = (
    "campaign_id", "task_id", "index", "status", "termination", "verdict", "categories", "clean_looking",
    "task_hash", *TOKENS, "agent_cost", "eval_cost", "tool_calls", "diff_items", "duration_ms",
    "result", "error_detail", "retries", "worker", "finished_at", "provider", "superseded_runs",
)  # fmt: skip


@dataclass(frozen=True)
class AttemptRow:
    """One stored attempt as a bench makes it: what differs between benches (the rest is fixed)."""

    status: str  # "done" or "infra_error"
    verdict: str  # "pass", "fail" or "" (not graded)
    termination: str
    categories: str  # JSON text
    clean_looking: bool
    result: str  # the stored AttemptResult, JSON text
    diff_items: int
    tool_calls: int
    task_hash: str = "0" * 64


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


def setup_django(url: str) -> None:
    """Django on ``url``, migrated, with the test client's host allowed (the benches request pages)."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thinkingbox_web.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    call_command("migrate", verbosity=0)


def stop_database(cluster) -> None:
    if cluster is not None:
        from django.db import connections

        connections.close_all()
        cluster.stop()


def create_campaigns(
    *, count: int, team, owner, suite, tasks: Sequence, n: int, agent_for: Callable, **fields
):
    """``count`` finished campaigns of ``team`` over ``tasks`` with N = ``n``; ``agent_for(c)`` gives the c-th
    campaign's AgentConfig. ``fields`` are further Campaign fields (a price sheet, a harness version)."""
    from django.db import transaction

    from apps.campaigns.models import Campaign

    campaigns = []
    with transaction.atomic():
        for c in range(count):
            campaign = Campaign.objects.create(
                name=f"Campaign {c:02d}",
                team=team,
                owner=owner,
                agent=agent_for(c),
                suite=suite,
                n_attempts=n,
                status="done",
                **{"harness_version": "bench", "suite_version": suite.version, **fields},
            )
            Campaign.tasks.through.objects.bulk_create(
                Campaign.tasks.through(campaign=campaign, task=t) for t in tasks
            )
            campaigns.append(campaign)
    return campaigns


def copy_attempts(campaigns: Sequence, tasks: Sequence, attempts_of: Callable) -> float:
    """Every campaign's attempts by COPY (one transaction per campaign) and their TaskSummary rows.

    ``attempts_of(campaign, task)`` returns the pair's AttemptRows (index = position). The summaries
    are counted from those rows: done and judged, passed, infra errors, clean-looking, tokens and
    costs of the finished attempts. Returns the seconds it took (VACUUM ANALYZE included).
    """
    from django.db import connection, transaction

    from apps.attempts.models import TaskSummary

    now = datetime.now(UTC)
    tokens = tuple(TOKENS.values())
    summaries = []
    started = time.perf_counter()
    for campaign in campaigns:
        with transaction.atomic(), connection.cursor() as cursor:
            with cursor.cursor.copy(
                f"COPY campaigns_attempt ({', '.join(ATTEMPT_COLUMNS)}) FROM STDIN"
            ) as copy:
                for task in tasks:
                    done = passed = infra = clean = 0
                    for index, row in enumerate(attempts_of(campaign, task)):
                        copy.write_row(
                            (
                                campaign.pk, task.pk, index, row.status, row.termination, row.verdict,
                                row.categories, row.clean_looking, row.task_hash, *tokens, AGENT_COST,
                                EVAL_COST, row.tool_calls, row.diff_items, 320.0, row.result, "", 0,
                                "bench:1", now, "[]", "[]",
                            )
                        )  # fmt: skip
                        judged = row.status == "done" and row.verdict in ("pass", "fail")
                        done += judged
                        passed += row.verdict == "pass"
                        infra += row.status == "infra_error"
                        clean += row.clean_looking
                    summaries.append(
                        TaskSummary(
                            campaign=campaign,
                            task=task,
                            n_done=done,
                            n_pass=passed,
                            n_infra_error=infra,
                            n_clean_looking=clean,
                            **{column: value * done for column, value in TOKENS.items()},
                            agent_cost=AGENT_COST * done,
                            eval_cost=EVAL_COST * done,
                        )
                    )
    TaskSummary.objects.bulk_create(summaries, batch_size=2000)
    with connection.cursor() as cursor:
        # A vacuumed, analysed database, as a running one is: without it autovacuum wakes up over
        # the fresh heap in the middle of what the bench times (the backfill's read, the pages).
        cursor.execute("VACUUM ANALYZE")
    return time.perf_counter() - started


def load() -> str:
    """The machine's 1-minute load (shared with other sessions: printed beside every figure)."""
    return Path("/proc/loadavg").read_text().split()[0]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]
