"""Demo step: run the demo campaigns (golden + four simulated personas) through the worker pool."""

from __future__ import annotations

import time

from apps.agents.services import agent_config_for
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import campaign_progress
from apps.campaigns.services import campaign_create, campaign_start, campaigns_wait
from apps.core.demo import DemoContext, demo_step
from apps.core.services import worker_heartbeat_forget
from thinkingbox_web.embedded import SupervisedWorker, broker_is_embedded, tasks_run_inline

DEMO_AGENTS = ("golden", "sim:steady", "sim:explorer", "sim:careless", "sim:cautious")
DEMO_N = 20  # the norm; `demo --repeat N` changes it


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
    worker = (
        SupervisedWorker(on_exit=worker_heartbeat_forget).start()
        if broker_is_embedded() and not tasks_run_inline()
        else None
    )
    started = time.monotonic()
    try:
        finished = campaigns_wait(
            [c.pk for c in to_wait], timeout=1800, on_progress=_printer(context, to_wait), sweep_every=10
        )
    finally:
        if worker is not None:
            worker.stop()
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
