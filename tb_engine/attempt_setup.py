"""Assemble one attempt from plain configuration: backend, agent, user simulator, judge, limits, prices.

Every place that runs an attempt — the campaign worker, the CLI, task validation, the training
environment, ``run_task`` and the benchmarks — builds it here, so a stored campaign, a command
line and a test mean the same thing by "the scripted user" or "the keyword judge".

Configurations are JSON-able mappings, as the Django side stores them:

* agent: a spec string (``golden``, ``sim:<persona>``, ``check:<kind>`` — a harness check,
  tb_engine.agents.harness_checks), an ``Agent`` object, or a mapping ``{"spec": "golden" |
  "sim:<persona>" | "check:<kind>" | "openai", "name", "model", "base_url", "api_key_env",
  "parameters", "max_concurrency", "provider_headers"}`` (the endpoint fields are read for
  ``openai`` only; a simulated persona reads ``parameters.switch_at`` / ``switch_to``, see
  ``scheduled_persona``);
* user simulator: ``{"kind": "scripted"}`` (also ``{}``), or ``{"kind": "llm", <EndpointConfig
  fields>, "prompt": <instructions with {query}, {user_context}, {stop_token}>}``; or a
  ``UserSimulator`` object;
* judge: ``{"kind": "keyword"}`` (also ``{}``), or ``{"kind": "llm", <EndpointConfig fields>,
  "prompt": <instructions>}`` (temperature 0, strict yes/no parsing); a ``Judge`` object; or
  None for no judge (every rubric is then unjudged, SPEC §2). A task without rubrics gets no
  judge whatever the configuration. ``normalise_user_config`` / ``normalise_judge_config``
  check a configuration before it is stored.

``AttemptSetup.cost`` prices a finished attempt with the setup's price list (SPEC §5).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tb_engine.agents.fault_personas import RETRY_PERSONAS, make_retry_agent
from tb_engine.agents.golden import make_golden_agent
from tb_engine.agents.harness_checks import RUN_KINDS, GoldenWrites, make_harness_check_agent
from tb_engine.agents.openai_agent import OpenAIAgent
from tb_engine.agents.openai_parameters import split_parameters
from tb_engine.agents.process_personas import PROCESS_PERSONAS, make_process_persona_agent
from tb_engine.agents.simulated import make_simulated_agent
from tb_engine.backend import Backend, SqliteBackend
from tb_engine.faults import FaultPlan, FaultyBackend, unfireable_record
from tb_engine.interfaces import Agent, InfraError, Judge, UserSimulator
from tb_engine.judges import KeywordJudge
from tb_engine.llm.config import EndpointConfig
from tb_engine.llm_judge import JUDGE_INSTRUCTIONS, LLMJudge
from tb_engine.pricing import AttemptCost, PriceList, attempt_cost
from tb_engine.results import AttemptResult
from tb_engine.runner import Limits, Steps, attempt_steps, backend_failed_result, run_attempt
from tb_engine.spec import DomainSpec, TaskSpec
from tb_engine.transcript import ToolCallRequest
from tb_engine.users.llm_user import DEFAULT_INSTRUCTIONS, LLMUser
from tb_engine.users.scripted import ScriptedUser

if TYPE_CHECKING:
    from tb_engine.agents.harness_checks import GoldenWrites

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
    faults: FaultPlan | None = None  # a fault plan (tb_engine.faults) applied to every backend opened
    attempt_index: int = 0  # the attempt's index within its task: with the plan's seed it picks the faults

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
        faults: FaultPlan | None = None,
        attempt_index: int = 0,
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
            faults=faults,
            attempt_index=attempt_index,
        )

    def with_agent(self, agent: Agent) -> AttemptSetup:
        """The same setup with another agent (e.g. the built one wrapped to beat a lease)."""
        return dataclasses.replace(self, agent=agent)

    def open_backend(self) -> Backend:
        """A private backend for one attempt: a SQLite sandbox, or a session of the domain's MCP server
        (behind the setup's fault plan, if any)."""
        return self.with_faults(open_backend(self.domain, self.task))

    def with_faults(self, backend: Backend) -> Backend:
        """``backend`` behind the setup's fault plan; itself when there is none (or it already is), or
        when the plan can fire nothing (its record is then made from the transcript: ``recorded``)."""
        if self.faults is None or not self.faults.can_fire or isinstance(backend, FaultyBackend):
            return backend
        # A sandbox's tools are the domain's own: their specs say which calls are read-only. An MCP
        # server declares that itself (its tool annotations), so the backend's schemas decide there.
        specs = self.domain.tools if self.domain.backend != "mcp" else None
        return FaultyBackend(
            backend, self.faults, task_id=self.task.id, attempt=self.attempt_index, tool_specs=specs
        )

    def run(self, backend: Backend | None = None) -> AttemptResult:
        """Run and grade the attempt; on ``backend`` if given (the caller closes it), else on a fresh one."""
        if self.agent is None:
            raise ValueError(f"task {self.task.id}: this setup has no agent; drive steps() instead")
        if backend is not None:
            return self._run_on(self.with_faults(backend), self.agent)
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

    def recorded(self, result: AttemptResult) -> AttemptResult:
        """``result`` with the fault record of a plan that can fire nothing (FaultyBackend writes the
        record of the others); ``result`` itself otherwise."""
        if self.faults is not None and not self.faults.can_fire and "faults" not in result.extra:
            result.extra["faults"] = unfireable_record(self.faults, result.transcript)
        return result

    def _recorded_steps(self, steps: Steps[AttemptResult]) -> Steps[AttemptResult]:
        return self.recorded((yield from steps))

    def _run_on(self, backend: Backend, agent: Agent) -> AttemptResult:
        result = self.recorded(
            run_attempt(self.task, backend, agent=agent, user=self.user, judge=self.judge, limits=self.limits)
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
        steps = attempt_steps(
            self.task, self.with_faults(backend), user=self.user, judge=self.judge, limits=self.limits
        )
        if self.faults is None or self.faults.can_fire:
            return steps
        return self._recorded_steps(steps)

    def cost(self, result: AttemptResult) -> AttemptCost:
        """The attempt's cost per role under ``prices``; unpriced (None) where tokens were used without a price."""
        return attempt_cost(
            result.transcript,
            agent_model=self.agent_model,
            user_model=self.user_model,
            judge_model=self.judge_model,
            sheet=self.prices,
        )


def open_backend(domain: DomainSpec, task: TaskSpec) -> Backend:
    """A private backend for one attempt of ``task``: a SQLite sandbox, or a fresh MCP server session."""
    if domain.backend == "mcp":
        from tb_engine.thinkingbox.mcp_pool import backend_for_domain  # noqa: PLC0415 — heavy: the tb_engine.thinkingbox package loads pandas and scipy (~1 s); only MCP domains need it

        return backend_for_domain(domain, task)
    return SqliteBackend(domain, task)


_WRITES_CACHE_SIZE = 1024
_writes_cache: OrderedDict[tuple[str, str, str], GoldenWrites] = OrderedDict()
_writes_lock = threading.Lock()


def golden_writes(domain: DomainSpec, task: TaskSpec) -> GoldenWrites:
    """What each golden call writes, from one golden replay on a fresh backend (cached per task version).

    Harness checks need it (which call is the last write, which creates a row): tool servers
    rarely declare read-only tools, so the replay's own effect record decides.
    """
    key = (domain.name, task.content_hash(), repr(sorted((domain.mcp or {}).get("launch", {}).items())))
    with _writes_lock:
        if key in _writes_cache:
            _writes_cache.move_to_end(key)
            return _writes_cache[key]
    if domain.backend == "mcp":  # the state after every state-changing call, not only on failure
        domain = dataclasses.replace(domain, mcp={**(domain.mcp or {}), "attribute_writes": "per_call"})
    backend = open_backend(domain, task)
    try:
        initial = backend.initial_snapshot()
        changed, errors = [], []
        for index, call in enumerate(task.golden):
            done = backend.call_tool(
                ToolCallRequest(f"golden-probe-{index}", call.tool, dict(call.arguments)), index=index, turn=0
            )
            if done.error is not None:
                errors.append(f"call {index} ({call.tool}): {done.error}")
            if done.changed_state:
                changed.append(index)
        backend.result_snapshot()  # the final state: MCP backends attribute the last call's writes here
        places = backend.writes()
        value_log_of = getattr(backend, "value_log", None)
        logged = value_log_of() if callable(value_log_of) else None
        specs = backend.table_specs()
        schemas = {tool.name: tool.parameters for tool in backend.tool_schemas()}
    finally:
        backend.close()
    written: dict[int, set[tuple[str, str | None]]] = {}
    creates: set[int] = set()
    for (table, row_key, column), indexes in places.items():
        for index in indexes:
            written.setdefault(index, set()).add((table, column))
            existed = table in initial.tables and row_key in initial.tables[table].rows
            if column is None and not existed:
                creates.add(index)
    result = GoldenWrites(
        writes=tuple(sorted(set(changed) | set(written))),
        creates=tuple(sorted(creates)),
        written={i: tuple(sorted(w, key=lambda p: (p[0], p[1] or ""))) for i, w in written.items()},
        unstable={name: frozenset(spec.unstable) for name, spec in specs.items()},
        errors=tuple(errors),
        schemas=schemas,
        value_log=tuple(tuple(row) for row in logged or ()),
    )
    with _writes_lock:
        _writes_cache[key] = result
        while len(_writes_cache) > _WRITES_CACHE_SIZE:
            _writes_cache.popitem(last=False)
    return result


def run_task(
    domain: DomainSpec,
    task: TaskSpec,
    *,
    agent: AgentConfig = "golden",
    seed: int = 0,
    user: UserConfig = SCRIPTED_USER,
    judge: JudgeConfig = KEYWORD_JUDGE,
    limits: Limits = Limits(),
    faults: FaultPlan | None = None,
    attempt_index: int = 0,
) -> AttemptResult:
    """Convenience: one attempt on a fresh private backend (closed afterwards), scripted user and keyword judge by default."""
    setup = AttemptSetup.from_config(
        domain,
        task,
        agent=agent,
        seed=seed,
        user=user,
        judge=judge,
        limits=limits,
        faults=faults,
        attempt_index=attempt_index,
    )
    return setup.run()


def make_agent(spec: str, *, task: TaskSpec, domain: DomainSpec | None = None, seed: int = 0) -> Agent:
    """Resolve an agent spec: ``golden``, ``sim:<persona>`` or ``check:<kind>`` (the last two need the domain)."""
    if spec == "golden":
        return make_golden_agent(task)
    if spec.startswith("check:"):
        kind = spec[len("check:") :]
        if kind not in RUN_KINDS or kind == "golden":
            raise ValueError(f"unknown harness check {kind!r} (known: {', '.join(RUN_KINDS[1:])})")
        if kind == "do-nothing":
            return make_harness_check_agent(kind, task)
        if domain is None:
            raise ValueError(f"agent spec {spec!r}: harness checks need the task's domain")
        return make_harness_check_agent(kind, task, golden_writes(domain, task))
    if spec.startswith("sim:"):
        if domain is None:
            raise ValueError(f"agent spec {spec!r}: simulated personas need the task's domain")
        if spec[len("sim:") :] in RETRY_PERSONAS:
            return make_retry_agent(spec[len("sim:") :], task=task, domain=domain)
        if spec[len("sim:") :] in PROCESS_PERSONAS:
            # An MCP server's S0 is the server's: its golden replay's value log says what a write changed.
            replay = golden_writes(domain, task) if domain.backend == "mcp" else None
            return make_process_persona_agent(spec[len("sim:") :], task=task, domain=domain, golden=replay)
        return make_simulated_agent(spec[len("sim:") :], task=task, domain=domain, seed=seed)
    raise ValueError(f"unknown agent spec {spec!r} (use 'golden', 'sim:<persona>' or 'check:<kind>')")


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

    # Agent options (end_marker, max_attempt_tokens, …) go to the agent, the rest to its endpoint.
    _, options = split_parameters(dict(config.get("parameters") or {}))
    return OpenAIAgent.from_dict(
        {"endpoint": agent_endpoint(config), **options, "name": config.get("name", "openai")}
    )


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
    endpoint, _ = split_parameters(dict(config.get("parameters") or {}))
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

    endpoint = _endpoint_fields(config)
    return LLMUser(
        EndpointConfig.from_dict(endpoint, label="user simulator"),
        instructions=config.get("prompt") or DEFAULT_INSTRUCTIONS,
    )


def build_judge(config: JudgeConfig, task: TaskSpec) -> Judge | None:
    """The rubric judge a judge configuration describes; None when the task has no rubrics or no judge is configured."""
    if config is None or not task.rubrics:
        return None
    if not isinstance(config, Mapping):
        return config
    if config.get("kind", "keyword") == "keyword":
        return KeywordJudge.for_task(task)

    endpoint = {**_endpoint_fields(config), "temperature": 0.0}  # a judge samples nothing
    return LLMJudge(
        EndpointConfig.from_dict(endpoint, label="judge"),
        instructions=config.get("prompt") or JUDGE_INSTRUCTIONS,
        strict=True,
    )


_NOT_ENDPOINT = ("kind", "prompt")


def _endpoint_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    endpoint = {key: value for key, value in config.items() if key not in _NOT_ENDPOINT}
    if not endpoint.get("api_key_env"):
        endpoint["api_key_env"] = None  # a local endpoint that needs no key
    return endpoint


def normalise_user_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A user-simulator configuration checked and in its stored form (raises ValueError naming the field).

    ``{"kind": "scripted"}``, or ``{"kind": "llm", "model", "base_url", "api_key_env", …, "prompt"}``
    where the prompt (default: the built-in one, stored so the campaign records it) must hold
    ``{query}``, ``{user_context}`` and ``{stop_token}``.
    """
    config = dict(config or {})
    kind = config.get("kind") or "scripted"
    if kind == "scripted":
        return {"kind": "scripted"}
    if kind != "llm":
        raise ValueError(f"user simulator: kind: must be 'scripted' or 'llm', got {kind!r}")

    prompt = str(config.get("prompt") or DEFAULT_INSTRUCTIONS)
    for placeholder in ("{query}", "{user_context}", "{stop_token}"):
        if placeholder not in prompt:
            raise ValueError(f"user simulator: prompt: must contain {placeholder}")
    endpoint = _endpoint_fields(config)
    EndpointConfig.from_dict(endpoint, label="user simulator")  # raises on a bad field
    return {"kind": "llm", **{k: v for k, v in config.items() if k not in _NOT_ENDPOINT}, "prompt": prompt}


def normalise_judge_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A judge configuration checked and in its stored form (raises ValueError naming the field).

    ``{"kind": "keyword"}``, or ``{"kind": "llm", "model", "base_url", "api_key_env", …, "prompt",
    "temperature": 0}``: an LLM judge always samples at temperature 0 and its answers are parsed
    strictly (first line exactly yes or no); an unreadable answer leaves the rubric unjudged.
    """
    config = dict(config or {})
    kind = config.get("kind") or "keyword"
    if kind == "keyword":
        return {"kind": "keyword"}
    if kind != "llm":
        raise ValueError(f"judge: kind: must be 'keyword' or 'llm', got {kind!r}")

    if config.get("temperature") not in (None, 0, 0.0):
        raise ValueError(
            f"judge: temperature: an LLM judge runs at temperature 0, got {config['temperature']!r}"
        )
    prompt = str(config.get("prompt") or JUDGE_INSTRUCTIONS)
    endpoint = {**_endpoint_fields(config), "temperature": 0.0}
    EndpointConfig.from_dict(endpoint, label="judge")  # raises on a bad field
    stored = {k: v for k, v in config.items() if k not in _NOT_ENDPOINT}
    return {"kind": "llm", **stored, "temperature": 0.0, "prompt": prompt}


def _agent_model(config: AgentConfig | None) -> str:
    """The model an agent's tokens are priced at: its endpoint model, else its spec (``sim:<persona>``)."""
    if isinstance(config, str):
        return config
    if isinstance(config, Mapping):
        return config.get("model") or config["spec"]
    return ""


def _model_of(config: Any) -> str:
    return str(config.get("model", "")) if isinstance(config, Mapping) else ""
