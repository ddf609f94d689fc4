"""Pages for the agents under test and the price sheets: list, create, edit, test a connection.

Everyone with the viewer role sees the agents of their teams (and the shared ones) and every price
sheet; operators create and edit their teams' agents and price sheets, administrators also shared
agents. Credentials are never typed, stored or shown: an agent names the environment variable that
holds its key, from the administrator's allow-list, and the pages show names only.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from apps.agents.connection import connection_test, key_variables
from apps.agents.forms import AgentForm, PriceSheetForm
from apps.agents.models import AgentConfig, PriceSheet
from apps.agents.selectors import agent_editable_by, agents_visible_to
from apps.agents.services import (
    AgentInUse,
    InvalidAgentConfig,
    PriceSheetInUse,
    agent_config_create,
    agent_config_update,
    price_sheet_create,
    price_sheet_update,
)
from apps.core.access import require_role, role_rank, teams_for, user_has_role
from apps.core.roles import Role
from tb_engine.pricing import PriceSheetError


def _is_admin(user) -> bool:
    return role_rank(user) >= Role.ADMIN.rank


def _agent_form(request, data=None, initial=None) -> AgentForm:
    return AgentForm(
        data, initial=initial, teams=teams_for(request.user), allow_shared=_is_admin(request.user)
    )


@require_role(Role.VIEWER)
def agent_list(request):
    agents = agents_visible_to(request.user).select_related("team").order_by("name")
    rows = list(agents)
    context = {
        "rows": rows,
        "keys": key_variables(),
        "can_create": user_has_role(request.user, Role.OPERATOR),
    }
    return render(request, "agents/list.html", context)


@require_http_methods(["GET", "POST"])
@require_role(Role.OPERATOR)
def agent_create(request):
    form = _agent_form(request, request.POST or None, initial={"max_concurrency": 256})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        team = data.get("team")
        if team is None and not _is_admin(request.user):
            form.add_error("team", "choose one of your teams")
        else:
            try:
                agent = agent_config_create(
                    name=data["name"],
                    kind=AgentConfig.Kind.OPENAI,
                    model=data["model"],
                    base_url=data["base_url"],
                    api_key_env=data["api_key_env"],
                    parameters=form.parameters(),
                    max_concurrency=data["max_concurrency"],
                    team=team,
                )
            except InvalidAgentConfig as exc:
                form.add_problems(exc.problems)
            else:
                messages.success(
                    request, f"Agent {agent.name} saved. Test its connection, then launch a campaign with it."
                )
                return HttpResponseRedirect(reverse("agents:detail", args=[agent.pk]))
    return render(request, "agents/form.html", {"form": form, "agent": None, "keys": key_variables()})


def _visible_agent(request, pk: int) -> AgentConfig:
    return get_object_or_404(agents_visible_to(request.user), pk=pk)


@require_http_methods(["GET", "POST"])
@require_role(Role.VIEWER)
def agent_detail(request, pk: int):
    """One agent: its settings (editable by its team's operators), its campaigns, the connection test."""
    agent = _visible_agent(request, pk)
    editable = agent.kind == AgentConfig.Kind.OPENAI and agent_editable_by(agent, request.user)
    form = _agent_form(request, request.POST or None, initial=AgentForm.initial_of(agent))
    if request.method == "POST":
        if not editable:
            raise PermissionDenied("only the agent's team operators (or an administrator) edit it")
        if form.is_valid():
            data = form.cleaned_data
            changes = {
                "name": data["name"],
                "model": data["model"],
                "base_url": data["base_url"],
                "api_key_env": data["api_key_env"],
                "parameters": form.parameters(),
                "max_concurrency": data["max_concurrency"],
            }
            if data.get("team") is not None or _is_admin(request.user):
                changes["team"] = data.get("team")
            changes = {name: value for name, value in changes.items() if value != getattr(agent, name)}
            try:
                agent_config_update(agent=agent, changes=changes)
            except InvalidAgentConfig as exc:
                form.add_problems(exc.problems)
            except AgentInUse as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Agent {data['name']} saved.")
                return HttpResponseRedirect(reverse("agents:detail", args=[agent.pk]))
    context = {
        "agent": agent,
        "form": form,
        "editable": editable,
        "can_test": agent.kind == AgentConfig.Kind.OPENAI and user_has_role(request.user, Role.OPERATOR),
        "can_launch": user_has_role(request.user, Role.OPERATOR),
        "campaigns": agent.campaigns.filter(team__in=teams_for(request.user)).order_by("-pk")[:20],
        "keys": key_variables(),
    }
    return render(request, "agents/detail.html", context)


@require_POST
@require_role(Role.OPERATOR)
def agent_test(request, pk: int):
    """One real call to the agent's endpoint; the answer comes back as the page's message."""
    agent = _visible_agent(request, pk)
    result = connection_test(agent)
    text = result.summary + (f" Reply: {result.reply!r}" if result.reply else "")
    (messages.success if result.ok else messages.error)(request, text)
    return HttpResponseRedirect(reverse("agents:detail", args=[agent.pk]) + "#connection")


@require_role(Role.VIEWER)
def price_sheet_list(request):
    sheets = PriceSheet.objects.order_by("-effective_date", "name")
    return render(
        request,
        "agents/price_sheets.html",
        {"sheets": sheets, "can_create": user_has_role(request.user, Role.OPERATOR)},
    )


@require_http_methods(["GET", "POST"])
@require_role(Role.OPERATOR)
def price_sheet_new(request):
    form = PriceSheetForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            sheet = price_sheet_create(
                name=data["name"],
                source=data["source"],
                effective_date=data["effective_date"],
                models=data["prices"],
            )
        except PriceSheetError as exc:
            form.add_error("prices", str(exc))
        else:
            messages.success(request, f"Price sheet {sheet.name} saved.")
            return HttpResponseRedirect(reverse("agents:price_sheet", args=[sheet.pk]))
    return render(request, "agents/price_sheet.html", {"form": form, "sheet": None, "editable": True})


@require_http_methods(["GET", "POST"])
@require_role(Role.VIEWER)
def price_sheet_detail(request, pk: int):
    sheet = get_object_or_404(PriceSheet, pk=pk)
    used = sheet.campaign_set.filter(team__in=teams_for(request.user)).count()
    in_use = sheet.campaign_set.exists()
    editable = user_has_role(request.user, Role.OPERATOR) and not in_use
    initial = {
        "name": sheet.name,
        "source": sheet.source,
        "effective_date": sheet.effective_date,
        "prices": PriceSheetForm.prices_text(sheet),
    }
    form = PriceSheetForm(request.POST or None, initial=initial)
    if request.method == "POST":
        if not user_has_role(request.user, Role.OPERATOR):
            raise PermissionDenied("this page needs the operator role")
        if form.is_valid():
            data = form.cleaned_data
            try:
                price_sheet_update(
                    sheet=sheet,
                    name=data["name"],
                    source=data["source"],
                    effective_date=data["effective_date"],
                    models=data["prices"],
                )
            except PriceSheetInUse as exc:
                form.add_error(None, str(exc))
            except PriceSheetError as exc:
                form.add_error("prices", str(exc))
            else:
                messages.success(request, f"Price sheet {data['name']} saved.")
                return HttpResponseRedirect(reverse("agents:price_sheet", args=[sheet.pk]))
    context = {"form": form, "sheet": sheet, "editable": editable, "in_use": in_use, "used": used}
    return render(request, "agents/price_sheet.html", context)
