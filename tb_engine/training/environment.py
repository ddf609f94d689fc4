"""Episodes of the training environment: one private SQLite sandbox and one suspended attempt each.

The HTTP trainer drives the agent side step by step, but the dialogue rules (tool calls in order,
repairs, user replies, turn and tool-call limits, termination) and the grading live in the runner.
Rather than copy them, each episode holds ``runner.attempt_steps`` — the very generator
``run_attempt`` drives — suspended at the agent's turn: ``/reset`` advances it to the first
``AgentView``, each ``/step`` sends the trainer's action in and runs it to the next view (no
thread per episode, no handoff). When the dialogue ends, the same generator grades the attempt,
so the episode's reward is exactly the grader's verdict (``reward.reward_of``).
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tb_engine.attempt_setup import KEYWORD_JUDGE, SCRIPTED_USER, AttemptSetup, JudgeConfig, UserConfig
from tb_engine.backend import Backend
from tb_engine.interfaces import AgentOutputError, AgentStep, InfraError, ToolSchema
from tb_engine.results import AttemptResult
from tb_engine.reward import RewardUnavailable, reward_of
from tb_engine.runner import Limits, Steps
from tb_engine.spec import DomainSpec, SuiteSpec, TaskSpec
from tb_engine.transcript import Message, ToolCallRequest

DEFAULT_TTL_S = 300.0
DEFAULT_MAX_EPISODES = 1024
FINISHED_MEMORY = (
    65_536  # finished episodes kept for /state (each is a few hundred bytes once its sandbox is gone)
)
EXPIRED_MEMORY = 10_000  # ids remembered as "expired" (vs unknown) for clearer errors


class EnvError(Exception):
    """A request the environment refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class EvaluationOnlyError(ValueError):
    """Training on an evaluation-only suite was requested without the explicit override."""


@dataclass(eq=False)
class Episode:
    id: str
    task: TaskSpec
    created: float
    last_active: float
    steps: Steps[AttemptResult] | None  # the suspended attempt; None once finished or ended
    backend: Backend | None  # the private sandbox; closed and dropped with ``steps``
    seen: int = 0  # messages already returned to the trainer
    turn: int = 0
    done: bool = False
    termination: str | None = ""  # the attempt's, once done (None after an infrastructure failure)
    verdict: str | None = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def end(self) -> None:
        """Drop the suspended attempt and hand the sandbox back (idempotent)."""
        steps, backend, self.steps, self.backend = self.steps, self.backend, None, None
        if steps is not None:
            steps.close()
        if backend is not None:
            backend.close()


def message_out(message: Message) -> dict[str, Any]:
    """What the trainer sees of one message: role, content and tool linkage only."""
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "tool":
        data.update(tool_call_id=message.tool_call_id, name=message.name, is_error=message.is_error)
    elif message.role == "assistant" and message.tool_calls:
        data["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    elif message.is_error:
        data["is_error"] = True
    return data


def tool_out(tool: ToolSchema) -> dict[str, Any]:
    """What the trainer sees of one tool: name, description, JSON-schema parameters, read-only flag."""
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "read_only": tool.read_only,
    }


def trainer_info(verdict: str, diagnostics: dict[str, Any]) -> dict[str, Any]:
    """End-of-episode info: diff classes and counts, check and rubric outcomes; no golden values,
    cell locations, check descriptions or rubric questions, so nothing in it can teach the policy
    the answer if a trainer feeds it back (SPEC §7)."""
    return {
        "verdict": verdict,
        "termination": diagnostics["termination"],
        "categories": diagnostics["categories"],
        "diff_counts": diagnostics["diff_counts"],
        "checks": [{"kind": c["kind"], "passed": c["passed"]} for c in diagnostics["checks"]],
        "rubrics": [{"answer": r["answer"]} for r in diagnostics["rubrics"]],
        "clean_looking": diagnostics["clean_looking"],
        "tool_calls": diagnostics["tool_calls"],
    }


def _field(value: Any, expected: type | tuple, where: str) -> Any:
    if not isinstance(value, expected):
        names = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
        raise EnvError(400, f"{where}: expected {names}, got {type(value).__name__}")
    return value


def parse_action(action: Any, *, turn: int) -> AgentStep | AgentOutputError:
    """Validate an action; structural problems are 400s, unparsable tool arguments become a repair (as in the runner)."""
    _field(action, dict, "action")
    unknown = sorted(set(action) - {"text", "content", "tool_calls", "done"})
    if unknown:
        raise EnvError(400, f"action: unknown field(s) {', '.join(unknown)} (use text, tool_calls, done)")
    text = _field(action.get("text", action.get("content")) or "", str, "action.text")
    done = _field(action.get("done", False), bool, "action.done")
    calls = []
    for i, raw in enumerate(_field(action.get("tool_calls") or [], list, "action.tool_calls")):
        where = f"action.tool_calls[{i}]"
        _field(raw, dict, where)
        spec = raw.get("function") if isinstance(raw.get("function"), dict) else raw  # OpenAI shape too
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise EnvError(400, f"{where}.name: a non-empty tool name is required")
        arguments = spec.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return AgentOutputError(f"tool call {i} ({name}): arguments are not valid JSON: {exc}")
        call_id = raw.get("id") or f"call-{turn}-{i}"
        calls.append(ToolCallRequest(str(call_id), name, arguments))
    if not text and not calls and not done:
        raise EnvError(400, "action: needs text, tool_calls or done")
    return AgentStep(text=text, tool_calls=calls, done=done)


def training_domain(domain: DomainSpec) -> DomainSpec:
    """The domain as episodes run it: an MCP domain gets ``attribute_writes: off``, ``evidence:
    verdict`` and its servers ``FASTMCP_LOG_LEVEL=WARNING``, unless the domain sets them itself.

    Write attribution only names which call wrote a diff item (``written_by``), which a trainer never
    sees (``info`` carries counts, not locations), while its default ("on_failure") replays every
    failed attempt on a second fresh server: measured on the real ThinkingBox servers, a failed
    episode cost 245 ms CPU with it and 75 ms without (3.3x), and most episodes early in training fail.
    FastMCP's INFO lines (its start-up line, through rich) cost each fresh server about 5 ms of its
    ~65 ms per episode; warnings, errors and tracebacks still reach an infra error's stderr tail.
    The full evidence (our recomputation of the server's two hashes, our diff beside its verdict)
    goes into ``AttemptResult.extra``, which an episode drops: a fifth of the grading step's CPU
    for nothing the reward or ``info`` reads.
    """
    if domain.backend != "mcp":
        return domain
    mcp = {"attribute_writes": "off", "evidence": "verdict", **(domain.mcp or {})}
    launch = mcp.get("launch")
    if isinstance(launch, dict) and launch.get("command"):
        mcp["launch"] = {**launch, "env": {"FASTMCP_LOG_LEVEL": "WARNING", **(launch.get("env") or {})}}
    return dataclasses.replace(domain, mcp=mcp)


class Environment:
    """Many concurrent episodes over a fixed task pool of one suite; thread-safe.

    Open episodes live in ``_open`` and finished ones in ``_finished``, each ordered by last
    activity, so expiring the idle ones only ever looks at the oldest entries.
    """

    def __init__(
        self,
        suite: SuiteSpec,
        *,
        task_ids: list[str] | None = None,
        allow_evaluation_only: bool = False,
        ttl_s: float = DEFAULT_TTL_S,
        max_episodes: int = DEFAULT_MAX_EPISODES,
        limits: Limits = Limits(),
        judge: JudgeConfig = KEYWORD_JUDGE,
        user: UserConfig = SCRIPTED_USER,
        clock: Callable[[], float] = time.monotonic,
        id_prefix: str = "",
    ):
        if suite.evaluation_only and not allow_evaluation_only:
            raise EvaluationOnlyError(
                f"suite {suite.name} v{suite.version} is evaluation-only (its licence forbids training on it); "
                "pass --allow-evaluation-only to override"
            )
        pool = sorted(suite.tasks) if task_ids is None else sorted(set(task_ids))
        unknown = [task_id for task_id in pool if task_id not in suite.tasks]
        if unknown:
            raise ValueError(
                f"task pool: {len(unknown)} task id(s) not in suite {suite.name}: {', '.join(unknown[:5])}"
            )
        if not pool:
            raise ValueError(f"task pool: empty (suite {suite.name})")
        self.suite = suite
        self.domains = {name: training_domain(domain) for name, domain in suite.domains.items()}
        self.pool = pool
        self.ttl_s = ttl_s
        self.max_episodes = max_episodes
        self.limits = limits
        self.judge = judge  # a judge configuration (attempt_setup)
        self.user = user  # the simulated user who answers the agent's text replies inside the episode
        self.clock = clock
        self.id_prefix = id_prefix  # marks which server process owns an episode (see workers.py)
        self._open: OrderedDict[str, Episode] = OrderedDict()
        self._finished: OrderedDict[str, Episode] = OrderedDict()
        self._expired: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._random = random.Random()

    @property
    def blocking(self) -> bool:
        """Whether a reset or step may wait on something outside this process: an MCP server process,
        an LLM judge or an LLM user. The server then runs them off its event loop (in threads), so
        one slow episode never holds up the others."""
        llm = any(
            not isinstance(config, dict) or config.get("kind") == "llm"
            for config in (self.judge, self.user)
            if config is not None
        )
        return llm or any(domain.backend == "mcp" for domain in self.suite.domains.values())

    # -- lifecycle -------------------------------------------------------------------------

    def reset(
        self, *, task_id: str | None = None, seed: int | None = None, episode_id: str | None = None
    ) -> dict[str, Any]:
        """Start an episode on ``task_id`` (or a pool task drawn with ``seed``) and return its first observation.

        ``episode_id`` lets the client name the episode (OpenEnv's reset takes one); it must not name
        an episode this environment still remembers."""
        if episode_id is not None:
            _field(episode_id, str, "episode_id")
            if not episode_id or len(episode_id) > 128:
                raise EnvError(400, "episode_id: expected 1 to 128 characters")
            with self._lock:
                taken = episode_id in self._open or episode_id in self._finished
            if taken:
                raise EnvError(409, f"episode_id: {episode_id!r} is already in use")
        if task_id is not None:
            _field(task_id, str, "task_id")
            if task_id not in self.suite.tasks:
                raise EnvError(404, f"task_id: {task_id!r} is not in suite {self.suite.name}")
            if task_id not in self.pool:
                raise EnvError(403, f"task_id: {task_id!r} is not in this server's training pool")
        else:
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
                raise EnvError(400, f"seed: expected int, got {type(seed).__name__}")
            chooser = random.Random(seed) if seed is not None else self._random
            task_id = chooser.choice(self.pool)
        self.expire_idle()
        if len(self._open) >= self.max_episodes:  # checked again, atomically, when the episode is added
            raise self._full()
        task = self.suite.tasks[task_id]
        # No agent: the trainer's actions are the agent steps, sent into the suspended attempt.
        setup = AttemptSetup.from_config(
            self.domains[task.domain],
            task,
            agent=None,
            user=self.user,
            judge=self.judge,
            limits=self.limits,
        )
        try:
            backend = setup.open_backend()
        except InfraError as exc:  # e.g. an MCP server that would not start: the trainer may retry
            raise EnvError(503, f"task {task_id}: backend unavailable: {exc}") from None
        steps = setup.steps(backend)
        try:
            view = next(steps)
        except (
            StopIteration
        ) as finished:  # the dialogue ended before the agent was asked anything (a harness failure)
            backend.close()
            raise EnvError(500, f"task {task_id}: episode could not start: {finished.value.error}") from None
        now = self.clock()
        if episode_id is None:
            episode_id = self.id_prefix + uuid.uuid4().hex[len(self.id_prefix) :]
        episode = Episode(episode_id, task, now, now, steps, backend, seen=len(view.messages))
        with self._lock:
            full = len(self._open) >= self.max_episodes
            taken = episode_id in self._open or episode_id in self._finished
            if not full and not taken:
                self._open[episode.id] = episode
        if full or taken:
            episode.end()
            raise self._full() if full else EnvError(409, f"episode_id: {episode_id!r} is already in use")
        observation = {
            "policy": view.system_prompt,
            "tools": [tool_out(t) for t in view.tools],
            "messages": [message_out(m) for m in view.messages],
        }
        return {"episode_id": episode.id, "task_id": task_id, "observation": observation}

    def step(self, episode_id: str, action: Any) -> dict[str, Any]:
        """Apply one agent action; observation = new tool results / user messages; reward only when done."""
        episode = self._get(episode_id)
        with episode.lock:
            if episode.done:
                raise EnvError(409, f"episode {episode_id}: already done; call /reset for a new one")
            if episode.steps is None:  # expired between lookup and lock
                raise self._gone(episode_id)
            parsed = parse_action(action, turn=episode.turn)
            self._touch(episode)
            try:
                if isinstance(parsed, AgentOutputError):
                    view = episode.steps.throw(parsed)  # a repair, exactly as for unusable model output
                else:
                    view = episode.steps.send(parsed)
            except StopIteration as finished:
                episode.turn += 1
                return self._finish(episode, finished.value)
            episode.turn += 1
            self._touch(episode)
            return {
                "observation": self._observation(episode, view.messages),
                "reward": 0.0,
                "done": False,
                "info": {},
            }

    def _observation(self, episode: Episode, messages: list[Message]) -> dict[str, Any]:
        # The agent's own assistant message is not echoed back; everything after it is new to it.
        new = [message_out(m) for m in messages[episode.seen :] if m.role != "assistant"]
        episode.seen = len(messages)
        return {"messages": new, "turn": episode.turn}

    def _finish(self, episode: Episode, result: AttemptResult) -> dict[str, Any]:
        """Close the sandbox, keep a small record for /state and answer with the verdict as reward."""
        episode.end()
        episode.done, episode.termination, episode.verdict = True, result.termination, result.verdict
        episode.last_active = self.clock()
        with self._lock:
            self._open.pop(episode.id, None)
            self._finished[episode.id] = episode
            while len(self._finished) > FINISHED_MEMORY:
                self._remember_expired(self._finished.popitem(last=False)[0])
        observation = self._observation(episode, result.transcript.messages)
        try:
            graded = reward_of(result)
        except RewardUnavailable as exc:
            # Infrastructure failures are not agent failures: no reward, the trainer drops the episode.
            return {
                "observation": observation,
                "reward": None,
                "done": True,
                "info": {"infra_error": str(exc)},
            }
        return {
            "observation": observation,
            "reward": graded.reward,
            "done": True,
            "info": trainer_info(graded.verdict, graded.diagnostics),
        }

    def state(self, episode_id: str) -> dict[str, Any]:
        """Where an episode stands (no golden data; the verdict only once it is done)."""
        episode = self._get(episode_id)
        now = self.clock()
        data = {
            "episode_id": episode.id,
            "task_id": episode.task.id,
            "turn": episode.turn,
            "step_count": episode.turn,  # OpenEnv's State field
            "done": episode.done,
            "messages": episode.seen,
            "age_s": round(now - episode.created, 3),
            "expires_in_s": round(max(0.0, self.ttl_s - (now - episode.last_active)), 3),
        }
        if episode.done:
            data["termination"] = episode.termination
            data["reward"] = (
                1.0 if episode.verdict == "pass" else (0.0 if episode.verdict == "fail" else None)
            )
        return data

    def health(self) -> dict[str, Any]:
        """Pool size, open and finished (still queryable) episodes."""
        self.expire_idle()
        with self._lock:
            open_episodes, finished = len(self._open), len(self._finished)
        return {
            "suite": self.suite.name,
            "version": self.suite.version,
            "pool": len(self.pool),
            "episodes": open_episodes,
            "finished": finished,
        }

    # -- bookkeeping -----------------------------------------------------------------------

    def _get(self, episode_id: Any) -> Episode:
        _field(episode_id, str, "episode_id")
        self.expire_idle()
        with self._lock:
            episode = self._open.get(episode_id) or self._finished.get(episode_id)
        if episode is None:
            raise self._gone(episode_id)
        return episode

    def _full(self) -> EnvError:
        return EnvError(503, f"too many open episodes ({self.max_episodes}); finish or abandon some first")

    def _gone(self, episode_id: str) -> EnvError:
        if episode_id in self._expired:
            return EnvError(410, f"episode {episode_id}: expired after {self.ttl_s:g} s without activity")
        return EnvError(404, f"episode {episode_id}: unknown")

    def _touch(self, episode: Episode) -> None:
        episode.last_active = self.clock()
        with self._lock:
            if episode.id in self._open:
                self._open.move_to_end(episode.id)

    def expire_idle(self) -> list[str]:
        """End and forget every episode idle for longer than the TTL; returns their ids.

        Both tables are ordered by last activity, so this stops at the first fresh entry: O(expired)."""
        deadline = self.clock() - self.ttl_s
        stale: list[Episode] = []
        with self._lock:
            for table in (self._open, self._finished):
                while table:
                    episode = next(iter(table.values()))
                    if episode.last_active >= deadline or episode.lock.locked():
                        break  # the oldest is fresh (or mid-step, and about to be touched)
                    del table[episode.id]
                    self._remember_expired(episode.id)
                    stale.append(episode)
        for episode in stale:
            with episode.lock:
                episode.end()
        return [episode.id for episode in stale]

    def _remember_expired(self, episode_id: str) -> None:
        self._expired[episode_id] = None
        while len(self._expired) > EXPIRED_MEMORY:
            self._expired.popitem(last=False)

    def close_episode(self, episode_id: Any) -> dict[str, Any]:
        """End an episode now and forget it: an open one hands its sandbox back (no reward); a
        finished one drops its record. The trainer's way to abandon an episode without waiting for its TTL."""
        _field(episode_id, str, "episode_id")
        with self._lock:
            episode = self._open.pop(episode_id, None)
            was_open = episode is not None
            if episode is None:
                episode = self._finished.pop(episode_id, None)
        if episode is None:
            raise self._gone(episode_id)
        with episode.lock:
            episode.end()
        return {"episode_id": episode_id, "closed": True, "was_open": was_open}

    def is_open(self, episode_id: str) -> bool:
        with self._lock:
            return episode_id in self._open

    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        """End every open episode (their sandboxes go back to the pool)."""
        with self._lock:
            episodes = list(self._open.values())
            self._open.clear()
            self._finished.clear()
        for episode in episodes:
            with episode.lock:
                episode.end()
