"""Assemble one attempt from plain configuration: backend, agent, user simulator, judge, limits, prices.

Every place that runs an attempt — the campaign worker, the CLI, task validation, the training
environment, ``run_task`` and the benchmarks — builds it here, so a stored campaign, a command
line and a test mean the same thing by "the scripted user" or "the keyword judge".

Configurations are JSON-able mappings, as the Django side stores them:

* agent: a spec string (``golden``, ``sim:<persona>``), an ``Agent`` object, or a mapping
  ``{"spec": "golden" | "sim:<persona>" | "openai", "name", "model", "base_url", "api_key_env",
  "parameters", "max_concurrency", "provider_headers"}`` (the endpoint fields are read for ``openai``
  only; a simulated persona reads ``parameters.switch_at`` / ``switch_to``, see ``scheduled_persona``);
* user simulator: ``{"kind": "scripted"}`` (also ``{}``), or ``{"kind": "llm", <EndpointConfig
  fields>}``; or a ``UserSimulator`` object;
* judge: ``{"kind": "keyword"}`` (also ``{}``), or ``{"kind": "llm", <EndpointConfig fields>}``;
  a ``Judge`` object; or None for no judge (every rubric is then unanswered and cannot pass).
  A task without rubrics gets no judge whatever the configuration.

``AttemptSetup.cost`` prices a finished attempt with the setup's price list (SPEC §5).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tb_engine.backend import Backend, SqliteBackend
from tb_engine.interfaces import Agent, InfraError, Judge, UserSimulator
from tb_engine.judges import KeywordJudge
from tb_engine.pricing import AttemptCost, PriceList, attempt_cost
from tb_engine.results import AttemptResult
from tb_engine.runner import Limits, Steps, attempt_steps, backend_failed_result, run_attempt
from tb_engine.spec import DomainSpec, TaskSpec
from tb_engine.users.scripted import ScriptedUser

SCRIPTED_USER: Mapping[str, Any] = {"kind": "scripted"}
KEYWORD_JUDGE: Mapping[str, Any] = {"kind": "keyword"}

AgentConfig = str | Mapping[str, Any] | Agent
UserConfig = Mapping[str, Any] | UserSimulator
JudgeConfig = Mapping[str, Any] | Judge | None


@dataclass(frozen=True)
class AttemptSetup:
    """Everything one attempt of ``task`` runs with; build it with ``from_config``, once per attempt
    (agents and user simulators keep the state of the dialogue they are in).

    ``agent`` is None for an attempt whose agent steps arrive from outside (the training
    environment drives ``steps`` itself). The ``*_model`` names are what ``cost`` prices each
    role's tokens at.
    """

    domain: DomainSpec
    task: TaskSpec
    agent: Agent | None
    user: UserSimulator
    judge: Judge | None
    limits: Limits = Limits()
    prices: PriceList | None = None
    agent_model: str = ""
    user_model: str = ""
    judge_model: str = ""

    @classmethod
    def from_config(
        cls,
        domain: DomainSpec,
        task: TaskSpec,
        *,
        agent: AgentConfig | None = "golden",
        seed: int = 0,
        user: UserConfig = SCRIPTED_USER,
        judge: JudgeConfig = KEYWORD_JUDGE,
        limits: Limits = Limits(),
        prices: PriceList | None = None,
    ) -> AttemptSetup:
        """Build the agent, user simulator and judge their configurations describe (see module docstring)."""
        return cls(
            domain=domain,
            task=task,
            agent=None if agent is None else build_agent(agent, task=task, domain=domain, seed=seed),
            user=build_user(user),
            judge=build_judge(judge, task),
            limits=limits,
            prices=prices,
            agent_model=_agent_model(agent),
            user_model=_model_of(user),
            judge_model=_model_of(judge),
        )

    def with_agent(self, agent: Agent) -> AttemptSetup:
        """The same setup with another agent (e.g. the built one wrapped to beat a lease)."""
        return dataclasses.replace(self, agent=agent)

    def open_backend(self) -> Backend:
        """A private backend for one attempt: a SQLite sandbox, or a session of the domain's MCP server."""
        if self.domain.backend == "mcp":
            # Imported here: the MCP SDK is slow to import and only imported domains need it.
            from tb_engine.thinkingbox.mcp_backend import backend_for_domain

            return backend_for_domain(self.domain, self.task)
        return SqliteBackend(self.domain, self.task)

    def run(self, backend: Backend | None = None) -> AttemptResult:
        """Run and grade the attempt; on ``backend`` if given (the caller closes it), else on a fresh one."""
        if self.agent is None:
            raise ValueError(f"task {self.task.id}: this setup has no agent; drive steps() instead")
        if backend is not None:
            return self._run_on(backend, self.agent)
        started = time.perf_counter()
        try:
            backend = self.open_backend()
        except InfraError as exc:  # the backend would not start: infrastructure, never the agent's failure
            return backend_failed_result(self.task, exc, duration_ms=(time.perf_counter() - started) * 1000.0)
        try:
            result = self._run_on(backend, self.agent)
        finally:
            closing = time.perf_counter()
            backend.close()
            closed_ms = (time.perf_counter() - closing) * 1000.0
        timings = (result.extra.get("backend") or {}).get("timings_ms")
        if isinstance(timings, dict):  # the backend's own timings (MCP): closing is part of its overhead
            timings["close"] = round(closed_ms, 2)
        return result

    def _run_on(self, backend: Backend, agent: Agent) -> AttemptResult:
        result = run_attempt(
            self.task, backend, agent=agent, user=self.user, judge=self.judge, limits=self.limits
        )
        # Agents behind an endpoint say which model answered (response model, system_fingerprint,
        # chosen headers): kept with the attempt so a provider-side change shows between runs.
        report = getattr(agent, "provider_report", None)
        identities = report() if callable(report) else []
        if identities:
            result.extra["provider"] = identities
        return result

    def steps(self, backend: Backend) -> Steps[AttemptResult]:
        """The attempt on ``backend`` as the runner's step generator (the agent's steps are sent in)."""
        return attempt_steps(self.task, backend, user=self.user, judge=self.judge, limits=self.limits)

    def cost(self, result: AttemptResult) -> AttemptCost:
        """The attempt's cost per role under ``prices``; unpriced (None) where tokens were used without a price."""
        return attempt_cost(
            result.transcript,
            agent_model=self.agent_model,
            user_model=self.user_model,
            judge_model=self.judge_model,
            sheet=self.prices,
        )


def run_task(
    domain: DomainSpec,
    task: TaskSpec,
    *,
    agent: AgentConfig = "golden",
    seed: int = 0,
    user: UserConfig = SCRIPTED_USER,
    judge: JudgeConfig = KEYWORD_JUDGE,
    limits: Limits = Limits(),
) -> AttemptResult:
    """Convenience: one attempt on a fresh private backend (closed afterwards), scripted user and keyword judge by default."""
    setup = AttemptSetup.from_config(
        domain, task, agent=agent, seed=seed, user=user, judge=judge, limits=limits
    )
    return setup.run()


def make_agent(spec: str, *, task: TaskSpec, domain: DomainSpec | None = None, seed: int = 0) -> Agent:
    """Resolve an agent spec: ``golden`` or ``sim:<persona>`` (simulated personas need the domain)."""
    if spec == "golden":
        from tb_engine.agents.golden import make_golden_agent

        return make_golden_agent(task)
    if spec.startswith("sim:"):
        # Imported here: the simulated personas are a large module most runs never use.
        from tb_engine.agents.simulated import make_simulated_agent

        if domain is None:
            raise ValueError(f"agent spec {spec!r}: simulated personas need the task's domain")
        return make_simulated_agent(spec[len("sim:") :], task=task, domain=domain, seed=seed)
    raise ValueError(f"unknown agent spec {spec!r} (use 'golden' or 'sim:<persona>')")


def build_agent(config: AgentConfig, *, task: TaskSpec, domain: DomainSpec, seed: int = 0) -> Agent:
    """The agent an agent configuration describes (see module docstring)."""
    if isinstance(config, str):
        return make_agent(config, task=task, domain=domain, seed=seed)
    if not isinstance(config, Mapping):
        return config
    spec = config["spec"]
    if spec != "openai":
        return make_agent(
            scheduled_persona(spec, config.get("parameters") or {}), task=task, domain=domain, seed=seed
        )
    from tb_engine.agents.openai_agent import OpenAIAgent

    return OpenAIAgent.from_dict({"endpoint": agent_endpoint(config), "name": config.get("name", "openai")})


def scheduled_persona(spec: str, parameters: Mapping[str, Any], *, now: datetime | None = None) -> str:
    """A simulated agent's spec at ``now``: ``sim:<switch_to>`` once ``switch_at`` (ISO 8601) has passed.

    A labelled harness construct for drift checks and demos: a silent provider-side change (new
    weights behind the same name), with nothing in the configuration or the answers giving it away.
    """
    switch_at, switch_to = parameters.get("switch_at"), parameters.get("switch_to")
    if not spec.startswith("sim:") or not switch_at or not switch_to:
        return spec
    moment = datetime.fromisoformat(str(switch_at))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return f"sim:{switch_to}" if (now or datetime.now(UTC)) >= moment else spec


def agent_endpoint(config: Mapping[str, Any]) -> dict[str, Any]:
    """The EndpointConfig fields of an ``openai`` agent configuration (see module docstring).

    ``provider_headers`` names the response headers recorded with each call's model identity.
    """
    parameters = config.get("parameters") or {}
    endpoint = {key: value for key, value in parameters.items() if key != "end_marker"}
    endpoint.update(
        model=config.get("model", ""),
        base_url=config.get("base_url") or endpoint.get("base_url"),
        label="agent",
        api_key_env=config.get("api_key_env") or None,
    )
    if config.get("max_concurrency") is not None:
        endpoint.setdefault("max_concurrency", config["max_concurrency"])
    if config.get("provider_headers"):
        endpoint["provider_headers"] = list(config["provider_headers"])
    return endpoint


def build_user(config: UserConfig) -> UserSimulator:
    """The user simulator a user configuration describes: scripted (default) or an LLM endpoint."""
    if not isinstance(config, Mapping):
        return config
    if config.get("kind", "scripted") == "scripted":
        return ScriptedUser()
    from tb_engine.llm.config import EndpointConfig
    from tb_engine.users.llm_user import LLMUser

    return LLMUser(EndpointConfig.from_dict(_without_kind(config), label="user simulator"))


def build_judge(config: JudgeConfig, task: TaskSpec) -> Judge | None:
    """The rubric judge a judge configuration describes; None when the task has no rubrics or no judge is configured."""
    if config is None or not task.rubrics:
        return None
    if not isinstance(config, Mapping):
        return config
    if config.get("kind", "keyword") == "keyword":
        return KeywordJudge.for_task(task)
    from tb_engine.llm.config import EndpointConfig
    from tb_engine.llm_judge import LLMJudge

    return LLMJudge(EndpointConfig.from_dict(_without_kind(config), label="judge"))


def _without_kind(config: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key != "kind"}


def _agent_model(config: AgentConfig | None) -> str:
    """The model an agent's tokens are priced at: its endpoint model, else its spec (``sim:<persona>``)."""
    if isinstance(config, str):
        return config
    if isinstance(config, Mapping):
        return config.get("model") or config["spec"]
    return ""


def _model_of(config: Any) -> str:
    return str(config.get("model", "")) if isinstance(config, Mapping) else ""
