"""Campaign pages: list, launch, live progress (htmx polling that stops when the campaign ends)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling

from apps.agents.models import AgentConfig
from apps.agents.services import UnknownAgent, agent_config_for
from apps.attempts.selectors.progress import recent_errors, worker_activity
from apps.campaigns.evaluators import describe
from apps.campaigns.forms import CampaignLaunchForm
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import (
    LaunchEstimate,
    campaign_list_rows,
    campaign_live,
    campaign_non_discriminating_tasks,
    campaign_progress,
    campaign_robustness,
    campaigns_visible_to,
    launch_estimate,
    workers_alive,
)
from apps.campaigns.services import (
    NotReplicable,
    campaign_cancel,
    campaign_create,
    campaign_replicate,
    campaign_resume,
    campaign_start,
)
from apps.core.access import require_role, teams_for, user_has_role


def _get_campaign_for_user(request, pk: int) -> Campaign:
    """The campaign if the user's teams may see it; 404 otherwise (outsiders learn nothing)."""
    try:
        return campaigns_visible_to(request.user).get(pk=pk)
    except Campaign.DoesNotExist:
        raise Http404("no such campaign") from None


@login_required
def campaign_list(request):
    """The operations view: every campaign with progress, status, ETA and inline Cancel / Resume."""
    rows = campaign_list_rows(user=request.user)
    context = {
        "rows": rows,
        "workers_alive": workers_alive(),
        "can_launch": user_has_role(request.user, "operator"),
        "can_operate": user_has_role(request.user, "operator"),
        "teams": teams_for(request.user),
        "any_active": any(row.campaign.is_active for row in rows),
    }
    if request.htmx:
        return render(request, "campaigns/list.html#campaign-rows", context)
    return render(request, "campaigns/list.html", context)


@login_required
def campaign_detail(request, pk: int):
    campaign = _get_campaign_for_user(request, pk)
    root = campaign.replicate_of or campaign
    progress = campaign_progress(campaign=campaign)
    context = {
        "campaign": campaign,
        "evaluators": {
            "user": describe(campaign.user_simulator, default="scripted"),
            "judge": describe(campaign.judge, default="keyword"),
        },
        "replicate_set": list(
            campaigns_visible_to(request.user)
            .filter(Q(pk=root.pk) | Q(replicate_of=root))
            .order_by("created_at", "pk")
        ),
        "progress": progress,
        "live": campaign_live(campaign=campaign, progress=progress) if campaign.is_active else None,
        "errors": recent_errors(campaign_id=campaign.pk),
        "can_operate": user_has_role(request.user, "operator"),
        "workers_alive": workers_alive(),
        "worker_activity": worker_activity(campaign_id=campaign.pk),
    }
    if request.htmx:
        if not campaign.is_active and request.GET.get("poll"):
            # One last render so the page shows the final counts, then the poller stops.
            response = render(request, "campaigns/detail.html#progress", context)
            response.status_code = HttpResponseStopPolling.status_code
            return response
        return render(request, "campaigns/detail.html#progress", context)
    # Outside the polled fragment: what the campaign ran of the non-discriminating tasks.
    non_discriminating = campaign_non_discriminating_tasks(campaign=campaign)
    context["non_discriminating_tasks"] = non_discriminating
    context["non_discriminating_note"] = campaign.non_discriminating_statement(
        included=len(non_discriminating)
    )
    context["robustness"] = campaign_robustness(campaign=campaign, user=request.user)
    return render(request, "campaigns/detail.html", context)


def _chosen_agent(value: str, team) -> AgentConfig:
    """The launch form's agent: a stored configuration (pk:<id>) of no team or the campaign's, or a
    built-in spec created on first use."""
    if value.startswith("pk:") and value[3:].isdigit():
        agent = AgentConfig.objects.filter(pk=int(value[3:])).first()
        if agent is not None and agent.team_id not in (None, team.pk):
            raise UnknownAgent(f"agent {agent.name!r} belongs to another team than {team.name!r}")
        if agent is not None:
            return agent
    elif value.startswith("spec:"):
        return agent_config_for(value[5:])
    raise UnknownAgent(f"unknown agent choice {value!r}")


def _estimate_agent(value: str) -> AgentConfig | None:
    """The agent an estimate prices, without creating a built-in's row (a GET must not write)."""
    if value.startswith("pk:") and value[3:].isdigit():
        return AgentConfig.objects.filter(pk=int(value[3:])).first()
    if value == "spec:golden":
        return AgentConfig(kind=AgentConfig.Kind.GOLDEN)
    if value.startswith("spec:check:"):
        return AgentConfig(kind=AgentConfig.Kind.CHECK)
    return None


@require_role("operator")
def campaign_launch(request):
    teams = teams_for(request.user)
    # ?agent=pk:N preselects the agent (the agent page's "Launch a campaign with it").
    initial = {"agent": request.GET["agent"]} if request.method == "GET" and "agent" in request.GET else None
    form = CampaignLaunchForm(request.POST or None, teams=teams, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            campaign = campaign_create(
                name=data["name"],
                team=data["team"],
                owner=request.user,
                agent=_chosen_agent(data["agent"], data["team"]),
                suite=data["suite"],
                tasks=list(form.chosen_tasks()),
                n_attempts=data["n_attempts"],
                seed=data["seed"],
                user_simulator=data["user_simulator"],
                judge=data["judge"],
                price_sheet=data["price_sheet"],
                adaptive=form.adaptive_options(),
                exclude_non_discriminating=data["exclude_non_discriminating"],
                window=data.get("window"),
                fault_plan=data.get("fault_plan"),
            )
        except ValueError as exc:
            form.add_error(None, str(exc))
        else:
            campaign_start(campaign=campaign)
            return HttpResponseRedirect(reverse("campaigns:detail", args=[campaign.pk]))
    context = {"form": form, "workers_alive": workers_alive(), "estimate": _estimate(request, teams)}
    if request.htmx and request.method == "GET":
        return render(request, "campaigns/launch.html#launch-estimate", context)
    return render(request, "campaigns/launch.html", context)


def _estimate(request, teams) -> LaunchEstimate | None:
    """The estimate of what the form as filled in would launch (the POST, or the htmx GET on change)."""
    source = request.POST if request.method == "POST" else request.GET
    form = CampaignLaunchForm(source or None, teams=teams)
    if not form.is_bound:
        return None
    form.is_valid()  # fills cleaned_data with the fields that parse; the name may still be empty
    data = form.cleaned_data
    agent = _estimate_agent(data.get("agent") or "")
    if agent is None or not data.get("suite") or not data.get("n_attempts"):
        return None
    tasks = form.chosen_tasks()
    return launch_estimate(
        agent=agent,
        suite=data["suite"],
        tasks=[
            task
            for task in tasks
            if task.is_gradable
            and not (data.get("exclude_non_discriminating") and task.is_non_discriminating)
        ],
        n_attempts=data["n_attempts"],
        price_sheet=data.get("price_sheet"),
    )


def _back(request, pk: int) -> str:
    """Where an inline Cancel / Resume returns: the campaign list when it came from there."""
    return (
        reverse("campaigns:list")
        if request.POST.get("next") == "list"
        else reverse("campaigns:detail", args=[pk])
    )


@require_POST
@require_role("operator")
def campaign_cancel_view(request, pk: int):
    campaign = _get_campaign_for_user(request, pk)
    campaign_cancel(campaign=campaign)
    return HttpResponseRedirect(_back(request, pk))


@require_POST
@require_role("operator")
def campaign_resume_view(request, pk: int):
    campaign = _get_campaign_for_user(request, pk)
    campaign_resume(campaign=campaign)
    return HttpResponseRedirect(_back(request, pk))


@require_POST
@require_role("operator")
def campaign_replicate_view(request, pk: int):
    """Re-run the campaign's configuration with a new seed as a replicate (same set), and show it."""
    campaign = _get_campaign_for_user(request, pk)
    try:
        replicate = campaign_replicate(campaign=campaign, owner=request.user)
    except (NotReplicable, ValueError) as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(reverse("campaigns:detail", args=[pk]))
    messages.success(request, f"Replicate {replicate.name} started (seed {replicate.seed}).")
    return HttpResponseRedirect(reverse("campaigns:detail", args=[replicate.pk]))
