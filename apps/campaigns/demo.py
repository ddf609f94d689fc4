"""Demo steps: load the built-in suite, price sheets, and run the demo campaigns through the pool."""

from __future__ import annotations

import time
from datetime import date

from apps.campaigns.bootstrap import agent_config_for
from apps.campaigns.embedded import (
    broker_is_embedded,
    start_embedded_worker,
    stop_worker,
    tasks_run_inline,
    wait_for_campaigns,
)
from apps.campaigns.models import Campaign, PriceSheet
from apps.campaigns.pricing import price_sheet_load_starter
from apps.campaigns.selectors import campaign_progress
from apps.campaigns.services import campaign_create, campaign_start
from apps.core.demo import DemoContext, demo_step
from apps.suites.services import suite_load_builtin

DEMO_AGENTS = ("golden", "sim:steady", "sim:explorer", "sim:careless", "sim:cautious")
DEMO_N = 20  # the norm; `demo --repeat N` changes it
# Simulated personas cost nothing to run; for cost pages to read naturally the demo prices their
# synthetic tokens like real models of similar profile. The sheet says so wherever it is shown.
DEMO_PERSONA_PRICES = {
    "sim-steady": {"input": "2.00", "cached_input": "0.50", "output": "8.00"},
    "sim-explorer": {"input": "1.10", "cached_input": "0.275", "output": "4.40"},
    "sim-careless": {"input": "0.15", "cached_input": "0.075", "output": "0.60"},
    "sim-cautious": {"input": "1.00", "cached_input": "0.10", "output": "5.00"},
}


@demo_step(order=20, name="load the built-in five-domain suite")
def load_suite(context: DemoContext) -> None:
    suite = suite_load_builtin(name="starter", validate=True)
    counts = {}
    for status in suite.tasks.values_list("validation", flat=True):
        counts[status] = counts.get(status, 0) + 1
    context.shared["suite"] = suite
    context.notes.append(
        f"Suite: {suite.name} v{suite.version}, {suite.tasks.count()} tasks in {suite.domains.count()} domains "
        f"({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))})"
    )


@demo_step(order=30, name="load price sheets")
def load_price_sheets(context: DemoContext) -> None:
    starter = price_sheet_load_starter()
    demo_sheet, _ = PriceSheet.objects.update_or_create(
        name="Demo: simulated personas at illustrative prices",
        defaults={
            "source": f"Illustrative only: simulated personas are not models; their synthetic tokens are priced like "
            f"models of similar profile from '{starter.name}'",
            "effective_date": starter.effective_date or date.today(),
            "prices": {**starter.prices, **DEMO_PERSONA_PRICES},
        },
    )
    context.shared["demo_price_sheet"] = demo_sheet


@demo_step(order=40, name="run the demo campaigns (golden + 4 simulated personas) on the worker pool")
def run_demo_campaigns(context: DemoContext) -> None:
    if context.options.get("no_campaigns"):
        context.notes.append("Demo campaigns: skipped (--no-campaigns)")
        return
    repeat = context.options.get("repeat") or DEMO_N
    user, team, suite = context.shared["demo_user"], context.shared["demo_team"], context.shared["suite"]
    to_wait = []
    for spec in DEMO_AGENTS:
        agent = agent_config_for(spec)
        name = f"Demo · {agent.name}"
        existing = Campaign.objects.filter(name=name, team=team).order_by("-pk").first()
        if existing is not None and existing.status == Campaign.Status.DONE:
            continue
        campaign = existing or campaign_create(
            name=name,
            team=team,
            owner=user,
            agent=agent,
            suite=suite,
            n_attempts=repeat,
            seed=7,
            price_sheet=context.shared["demo_price_sheet"],
        )
        campaign_start(campaign=campaign)
        to_wait.append(campaign)
    if not to_wait:
        context.notes.append("Demo campaigns: already complete")
        return
    worker = start_embedded_worker() if broker_is_embedded() and not tasks_run_inline() else None
    started = time.monotonic()
    try:
        finished = wait_for_campaigns(
            [c.pk for c in to_wait], timeout=1800, on_progress=_printer(context, to_wait), sweep_every=10
        )
    finally:
        if worker is not None:
            stop_worker(worker)
    total = sum(campaign_progress(campaign=c).finished for c in to_wait)
    context.out.write("\n")
    seconds = time.monotonic() - started
    context.notes.append(
        f"Demo campaigns: {total} attempts in {seconds:.0f} s ({total / max(seconds, 1e-9):.0f}/s)"
    )
    if not finished:
        context.notes.append("Some demo campaigns are still running; the page shows their live progress.")


def _printer(context: DemoContext, campaigns):
    last = [0.0]

    def show() -> None:
        if time.monotonic() - last[0] < 2:
            return
        last[0] = time.monotonic()
        done = sum(campaign_progress(campaign=c).finished for c in campaigns)
        total = sum(c.n_attempts * c.tasks.count() for c in campaigns)
        context.out.write(f"\r  {done}/{total} attempts finished")
        context.out.flush()

    return show
