"""Writes for agent configurations and price sheets. Keyword-only; each docstring lists the side effects.

Validation of shape lives in the API's input serializers; the rules that protect stored results
live here, so every caller (API, commands, demo, imports) gets them.
"""

from __future__ import annotations

import fnmatch
import re
from datetime import date, datetime

from django.conf import settings
from django.db import transaction

from apps.agents.models import AgentConfig, PriceSheet
from tb_engine.agents.fault_personas import RETRY_PERSONAS
from tb_engine.agents.harness_checks import CHECKS, LABELS
from tb_engine.agents.openai_parameters import parameter_problems
from tb_engine.agents.process_personas import PROCESS_PERSONAS
from tb_engine.agents.simulated import PERSONAS
from tb_engine.llm.outbound import OutboundPolicy
from tb_engine.pricing import PriceList, load_starter_price_sheet

# Changing these would silently change what past campaigns of the agent mean.
BEHAVIOUR_FIELDS = ("kind", "persona", "model", "base_url", "parameters")


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Variables a worker reads for itself: never sent to an endpoint, whatever the allow-list says.
NEVER_KEY_VARIABLES = frozenset(
    {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "POSTGRES_PASSWORD"}
)
NEVER_KEY_PREFIXES = ("DJANGO_", "CELERY_", "DATABASE_", "POSTGRES_", "PG", "REDIS_", "TEST_")


class AgentInUse(Exception):
    """A behaviour field of an agent that campaigns already use cannot change."""


class UnknownAgent(ValueError):
    """An agent spec that is neither golden, a known sim:<persona> or check:<kind>, nor an AgentConfig name."""


class InvalidAgentConfig(ValueError):
    """An agent configuration its kind cannot run, or whose key variable is not allowed: field -> problem."""

    def __init__(self, problems: dict[str, str]):
        super().__init__("; ".join(f"{field}: {problem}" for field, problem in problems.items()))
        self.problems = problems


def api_key_env_refusal(name: str) -> str:
    """Why a worker may not send environment variable `name` as an endpoint's key ('' when it may).

    The worker sends the variable's value as a bearer token to the agent's base_url, which the
    operator chooses: only names the administrator allows (settings.API_KEY_ENV_ALLOWED, patterns
    like TB_KEY_*) may be named, and never the worker's own settings (database, broker, Django).
    """
    if not name:
        return ""
    if not ENV_NAME.match(name):
        return "must be an environment variable name like TB_KEY_OPENAI, not a key"
    allowed = list(settings.API_KEY_ENV_ALLOWED)
    if name in NEVER_KEY_VARIABLES or name.startswith(NEVER_KEY_PREFIXES):
        return f"{name!r} is one of the worker's own settings and is never sent to an endpoint"
    if not any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed):
        shown = ", ".join(allowed) or "(none)"
        return f"{name!r} is not an allowed key variable; allowed: {shown} (TB_API_KEY_ENV_ALLOWED)"
    return ""


def base_url_refusal(url: str) -> str:
    """Why the worker may not send requests to `url` ('' when it may, or when `url` is empty).

    The administrator's outbound policy (settings.OUTBOUND_ALLOWED_HOSTS, TB_OUTBOUND_ALLOWED_HOSTS):
    the host must be listed, and every address it resolves to now must be public unless listed
    (tb_engine.llm.outbound). The engine checks again on every connection it opens.
    """
    if not url:
        return ""
    return OutboundPolicy.of(settings.OUTBOUND_ALLOWED_HOSTS).url_refusal(url)


def agent_config_problems(
    *, kind: str, api_key_env: str = "", parameters: dict | None = None, base_url: str = ""
) -> dict[str, str]:
    """Field -> problem for an agent configuration of `kind` ({} when it can run as stored).

    Golden and simulated agents take no parameters; an OpenAI-compatible agent's parameters are
    checked the way the engine will read them (tb_engine.agents.openai_parameters).
    """
    problems: dict[str, str] = {}
    refusal = api_key_env_refusal(api_key_env)
    if refusal:
        problems["api_key_env"] = refusal
    refusal = base_url_refusal(base_url)
    if refusal:
        problems["base_url"] = refusal
    parameters = {} if parameters is None else parameters
    if isinstance(parameters, dict) and isinstance(parameters.get("base_url"), str):
        refusal = base_url_refusal(parameters["base_url"])
        if refusal:
            problems["parameters.base_url"] = refusal
    if kind == AgentConfig.Kind.OPENAI:
        problems.update(parameter_problems(parameters))
    elif kind == AgentConfig.Kind.SIMULATED and isinstance(parameters, dict):
        problems.update(schedule_problems(parameters))
    elif parameters:
        problems["parameters"] = (
            f"agents of kind {kind!r} take no parameters, got {', '.join(sorted(map(str, parameters)))}"
        )
    return problems


def schedule_problems(parameters: dict) -> dict[str, str]:
    """A simulated agent's only parameters: a persona switch (switch_at ISO 8601, switch_to a persona)."""
    problems: dict[str, str] = {}
    for key in sorted(set(parameters) - {"switch_at", "switch_to"}):
        problems[f"parameters.{key}"] = "unknown parameter; simulated agents take switch_at and switch_to"
    switch_at, switch_to = parameters.get("switch_at"), parameters.get("switch_to")
    if switch_at is not None:
        try:
            datetime.fromisoformat(str(switch_at))
        except ValueError:
            problems["parameters.switch_at"] = f"must be an ISO 8601 date-time, got {switch_at!r}"
    if switch_to is not None and switch_to not in PERSONAS:
        problems["parameters.switch_to"] = (
            f"unknown persona {switch_to!r}; known: {', '.join(sorted(PERSONAS))}"
        )
    if (switch_at is None) != (switch_to is None):
        problems.setdefault("parameters", "switch_at and switch_to go together")
    return problems


def agent_config_create(
    *,
    name: str,
    kind: str,
    persona: str = "",
    model: str = "",
    base_url: str = "",
    api_key_env: str = "",
    parameters: dict | None = None,
    max_concurrency: int = 256,
    team=None,
) -> AgentConfig:
    """Create an agent configuration. Side effects: one AgentConfig row (credentials only by env-var name).

    ``team`` owns it (its operators edit it); None makes it shared (administrators edit it).

    Raises InvalidAgentConfig (field -> problem) for parameters its kind cannot run or a key
    variable that is not allowed (api_key_env_refusal), or a base_url the outbound policy refuses
    (base_url_refusal).
    """
    problems = agent_config_problems(
        kind=kind, api_key_env=api_key_env, parameters=parameters or {}, base_url=base_url
    )
    if problems:
        raise InvalidAgentConfig(problems)
    return AgentConfig.objects.create(
        name=name,
        kind=kind,
        persona=persona,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        parameters=parameters or {},
        max_concurrency=max_concurrency,
        team=team,
    )


@transaction.atomic
def agent_config_update(*, agent: AgentConfig, changes: dict) -> AgentConfig:
    """Apply `changes` to an agent configuration.

    Side effects: updates the AgentConfig row. Raises AgentInUse when a behaviour field
    (kind, persona, model, base_url, parameters) would change while campaigns use the agent:
    their results must keep describing the configuration that produced them. Raises
    InvalidAgentConfig when the changed configuration could not run (see agent_config_create).
    """
    locked = AgentConfig.objects.select_for_update().get(pk=agent.pk)
    checked = ("kind", "api_key_env", "parameters", "base_url")
    if set(checked) & set(changes):
        merged = {name: changes.get(name, getattr(locked, name)) for name in checked}
        problems = agent_config_problems(**merged)
        for name in ("api_key_env", "base_url"):
            if name not in changes:
                problems.pop(name, None)  # an older row's value is refused where it is used
        if problems:
            raise InvalidAgentConfig(problems)
    changed = [
        field for field in BEHAVIOUR_FIELDS if field in changes and changes[field] != getattr(locked, field)
    ]
    if changed and locked.campaigns.exists():
        raise AgentInUse(
            f"agent {locked.name!r} is used by campaigns; {', '.join(changed)} cannot change "
            "(create a new agent configuration instead)"
        )
    for field, value in changes.items():
        setattr(locked, field, value)
    locked.save()
    return locked


def agent_config_for(spec: str) -> AgentConfig:
    """'golden', 'sim:<persona>', 'check:<kind>' (each created on first use) or an existing AgentConfig's name.

    Side effects: at most one AgentConfig row (golden, a simulated persona or a harness check).
    Raises UnknownAgent.
    """
    if spec == "golden":
        agent, _ = AgentConfig.objects.get_or_create(
            name="golden (harness self-check)",
            defaults={"kind": AgentConfig.Kind.GOLDEN, "max_concurrency": 64},
        )
        return agent
    if spec.startswith("sim:"):
        persona = spec.split(":", 1)[1]
        if persona not in PERSONAS and persona not in RETRY_PERSONAS and persona not in PROCESS_PERSONAS:
            known = ", ".join(sorted({*PERSONAS, *RETRY_PERSONAS, *PROCESS_PERSONAS}))
            raise UnknownAgent(f"unknown simulated persona {persona!r}; known: {known}")
        agent, _ = AgentConfig.objects.get_or_create(
            name=f"sim:{persona} (simulated persona, not a model)",
            defaults={
                "kind": AgentConfig.Kind.SIMULATED,
                "persona": persona,
                "model": f"sim-{persona}",
                "max_concurrency": 64,
            },
        )
        return agent
    if spec.startswith("check:"):
        kind = spec.split(":", 1)[1]
        if kind not in CHECKS:
            raise UnknownAgent(f"unknown harness check {kind!r}; known: {', '.join(CHECKS)}")
        agent, _ = AgentConfig.objects.get_or_create(
            name=LABELS[kind],
            defaults={"kind": AgentConfig.Kind.CHECK, "persona": kind, "max_concurrency": 64},
        )
        return agent
    try:
        return AgentConfig.objects.get(name=spec)
    except AgentConfig.DoesNotExist:
        raise UnknownAgent(
            f"unknown agent {spec!r}: use golden, sim:<persona>, check:<kind> or an AgentConfig name"
        ) from None


def agent_config_imported(*, name: str, model: str, parameters: dict) -> AgentConfig:
    """The agent that stands for results run elsewhere (e.g. ``tb infer`` rows): found by name or created.

    Side effects: at most one AgentConfig row, of kind openai (not a simulation), with `parameters`
    recording where its results came from. An existing agent of that name is returned unchanged.
    """
    agent, _ = AgentConfig.objects.get_or_create(
        name=name, defaults={"kind": AgentConfig.Kind.OPENAI, "model": model, "parameters": parameters}
    )
    return agent


def price_sheet_create(*, name: str, source: str, effective_date: date, models: dict) -> PriceSheet:
    """Store a price sheet after the engine's own validation. Side effects: one PriceSheet row.

    Raises tb_engine.pricing.PriceSheetError naming the model and field when a price is bad.
    """
    sheet = PriceList.from_dict(
        {"name": name, "source": source, "effective_date": effective_date.isoformat(), "models": models},
        origin="price sheet",
    )
    return PriceSheet.objects.create(
        name=name, source=source, effective_date=effective_date, prices=sheet.to_dict()["models"]
    )


def price_sheet_load_starter() -> PriceSheet:
    """Store the engine's dated starter price sheet (idempotent by name). Side effects: one PriceSheet row."""
    sheet = load_starter_price_sheet()
    data = sheet.to_dict()
    row, _ = PriceSheet.objects.update_or_create(
        name=f"{sheet.name} ({sheet.effective_date})",
        defaults={"source": sheet.source, "effective_date": sheet.effective_date, "prices": data["models"]},
    )
    return row


def price_sheet_default() -> PriceSheet:
    """The most recent price sheet, loading the engine's dated starter sheet on first use.

    Side effects: the starter PriceSheet row when no sheet exists yet.
    """
    sheet = PriceSheet.objects.order_by("-effective_date", "-pk").first()
    if sheet is not None:
        return sheet
    return price_sheet_load_starter()


class PriceSheetInUse(Exception):
    """A price sheet campaigns were priced with cannot change: their costs must keep meaning what they meant."""


@transaction.atomic
def price_sheet_update(
    *, sheet: PriceSheet, name: str, source: str, effective_date: date, models: dict
) -> PriceSheet:
    """Replace a price sheet's name, source, date and prices after the engine's validation.

    Side effects: updates the PriceSheet row. Raises PriceSheetInUse when campaigns use the sheet
    (store a new, dated sheet instead) and tb_engine.pricing.PriceSheetError for a bad price.
    """
    locked = PriceSheet.objects.select_for_update().get(pk=sheet.pk)
    if locked.campaign_set.exists():
        raise PriceSheetInUse(
            f"price sheet {locked.name!r} prices existing campaigns; store a new sheet with its own date instead"
        )
    checked = PriceList.from_dict(
        {"name": name, "source": source, "effective_date": effective_date.isoformat(), "models": models},
        origin="price sheet",
    )
    locked.name, locked.source, locked.effective_date = name, source, effective_date
    locked.prices = checked.to_dict()["models"]
    locked.save()
    return locked
