"""Episodes of the training environment: one private SQLite sandbox and one runner thread each.

Why a thread per episode: the HTTP trainer drives the agent side step by step, but the dialogue
rules (tool calls in order, repairs, user replies, turn and tool-call limits, termination) live
in ``runner.run_attempt``. Rather than copy them, each episode runs ``run_attempt`` unchanged
with a ``RemoteAgent`` whose ``step`` hands the view out and blocks until the trainer's next
action arrives. When the dialogue ends, the same call grades the attempt, so the episode's
reward is exactly the grader's verdict (``reward.reward_of``).
"""

from __future__ import annotations

import json
import queue
import random
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from tb_engine.agents.base import AgentOutputError, AgentStep, AgentView, Judge
from tb_engine.backend import SqliteBackend
from tb_engine.judges import KeywordJudge
from tb_engine.results import AttemptResult
from tb_engine.reward import RewardUnavailable, reward_of
from tb_engine.runner import Limits, run_attempt
from tb_engine.spec import SuiteSpec, TaskSpec
from tb_engine.transcript import Message, ToolCallRequest
from tb_engine.users.scripted import ScriptedUser

DEFAULT_TTL_S = 300.0
DEFAULT_MAX_EPISODES = 1024
STEP_TIMEOUT_S = 60.0  # how long one step may take inside the sandbox before the caller gives up
EXPIRED_MEMORY = 10_000  # ids remembered as "expired" (vs unknown) for clearer errors


class EnvError(Exception):
    """A request the environment refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class EvaluationOnlyError(ValueError):
    """Training on an evaluation-only suite was requested without the explicit override."""


class _Expired(Exception):
    """Raised inside an abandoned episode's runner thread to end it (becomes infra_error, never a reward)."""


_STOP = object()


class RemoteAgent:
    """An Agent whose steps come from the trainer over HTTP (see module docstring)."""

    name = "remote"

    def __init__(self) -> None:
        self.inbox: queue.Queue = queue.Queue(maxsize=1)
        self.outbox: queue.Queue = queue.Queue(maxsize=1)

    def step(self, view: AgentView) -> AgentStep:
        self.outbox.put(("view", view))
        action = self.inbox.get()
        if action is _STOP:
            raise _Expired("episode expired")
        if isinstance(action, AgentOutputError):
            raise action
        return action


@dataclass
class Episode:
    id: str
    task: TaskSpec
    agent: RemoteAgent
    created: float
    last_active: float
    seen: int = 0  # messages already returned to the trainer
    turn: int = 0
    done: bool = False
    result: AttemptResult | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None


def message_out(message: Message) -> dict[str, Any]:
    """What the trainer sees of one message: role, content and tool linkage only."""
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "tool":
        data.update(tool_call_id=message.tool_call_id, name=message.name, is_error=message.is_error)
    elif message.role == "assistant" and message.tool_calls:
        data["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    elif message.is_error:
        data["is_error"] = True
    return data


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


class Environment:
    """Many concurrent episodes over a fixed task pool of one suite; thread-safe."""

    def __init__(
        self,
        suite: SuiteSpec,
        *,
        task_ids: list[str] | None = None,
        allow_evaluation_only: bool = False,
        ttl_s: float = DEFAULT_TTL_S,
        max_episodes: int = DEFAULT_MAX_EPISODES,
        limits: Limits = Limits(),
        judge_factory: Callable[[TaskSpec], Judge | None] = KeywordJudge.for_task,
        clock: Callable[[], float] = time.monotonic,
    ):
        if suite.evaluation_only and not allow_evaluation_only:
            raise EvaluationOnlyError(
                f"suite {suite.name} v{suite.version} is evaluation-only (its licence forbids training on it); "
                "pass --allow-evaluation-only to override"
            )
        pool = sorted(suite.tasks) if task_ids is None else sorted(set(task_ids))
        unknown = [task_id for task_id in pool if task_id not in suite.tasks]
        if unknown:
            raise ValueError(f"task pool: {len(unknown)} task id(s) not in suite {suite.name}: {', '.join(unknown[:5])}")
        if not pool:
            raise ValueError(f"task pool: empty (suite {suite.name})")
        self.suite = suite
        self.pool = pool
        self.ttl_s = ttl_s
        self.max_episodes = max_episodes
        self.limits = limits
        self.judge_factory = judge_factory
        self.clock = clock
        self._episodes: dict[str, Episode] = {}
        self._expired: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._random = random.Random()

    # -- lifecycle -------------------------------------------------------------------------

    def reset(self, *, task_id: str | None = None, seed: int | None = None) -> dict[str, Any]:
        """Start an episode on ``task_id`` (or a pool task drawn with ``seed``) and return its first observation."""
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
        with self._lock:
            if sum(1 for e in self._episodes.values() if not e.done) >= self.max_episodes:
                raise EnvError(503, f"too many open episodes ({self.max_episodes}); finish or abandon some first")
            now = self.clock()
            episode = Episode(uuid.uuid4().hex, self.suite.tasks[task_id], RemoteAgent(), now, now)
            self._episodes[episode.id] = episode
        task = episode.task
        backend = SqliteBackend(self.suite.domains[task.domain], task)
        episode.thread = threading.Thread(target=self._run, args=(episode, backend), name=f"episode-{episode.id[:8]}", daemon=True)
        episode.thread.start()
        kind, payload = episode.agent.outbox.get(timeout=STEP_TIMEOUT_S)
        if kind != "view":  # the dialogue ended before the agent was asked anything (a harness failure)
            self._forget(episode.id)
            raise EnvError(500, f"task {task_id}: episode could not start: {payload.error}")
        view: AgentView = payload
        episode.seen = len(view.messages)
        observation = {
            "policy": view.system_prompt,
            "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters, "read_only": t.read_only} for t in view.tools],
            "messages": [message_out(m) for m in view.messages],
        }
        return {"episode_id": episode.id, "task_id": task_id, "observation": observation}

    def _run(self, episode: Episode, backend: SqliteBackend) -> None:
        try:
            judge = self.judge_factory(episode.task)
            result = run_attempt(episode.task, backend, agent=episode.agent, user=ScriptedUser(), judge=judge, limits=self.limits)
        finally:
            backend.close()
        episode.agent.outbox.put(("result", result))

    def step(self, episode_id: str, action: Any) -> dict[str, Any]:
        """Apply one agent action; observation = new tool results / user messages; reward only when done."""
        episode = self._get(episode_id)
        with episode.lock:
            if episode.done:
                raise EnvError(409, f"episode {episode_id}: already done; call /reset for a new one")
            parsed = parse_action(action, turn=episode.turn)
            episode.last_active = self.clock()
            episode.agent.inbox.put(parsed)
            try:
                kind, payload = episode.agent.outbox.get(timeout=STEP_TIMEOUT_S)
            except queue.Empty:
                raise EnvError(504, f"episode {episode_id}: step took longer than {STEP_TIMEOUT_S:.0f} s") from None
            episode.last_active = self.clock()
            episode.turn += 1
            if kind == "view":
                return self._observe(episode, payload.messages, done=False)
            episode.done, episode.result = True, payload
            return self._observe(episode, payload.transcript.messages, done=True)

    def _observe(self, episode: Episode, messages: list[Message], *, done: bool) -> dict[str, Any]:
        # The agent's own assistant message is not echoed back; everything after it is new to it.
        new = [message_out(m) for m in messages[episode.seen:] if m.role != "assistant"]
        episode.seen = len(messages)
        observation = {"messages": new, "turn": episode.turn}
        if not done:
            return {"observation": observation, "reward": 0.0, "done": False, "info": {}}
        result = episode.result
        try:
            graded = reward_of(result)
        except RewardUnavailable as exc:
            # Infrastructure failures are not agent failures: no reward, the trainer drops the episode.
            return {"observation": observation, "reward": None, "done": True, "info": {"infra_error": str(exc)}}
        return {"observation": observation, "reward": graded.reward, "done": True, "info": trainer_info(graded.verdict, graded.diagnostics)}

    def state(self, episode_id: str) -> dict[str, Any]:
        """Where an episode stands (no golden data; the verdict only once it is done)."""
        episode = self._get(episode_id, touch=False)
        now = self.clock()
        data = {
            "episode_id": episode.id,
            "task_id": episode.task.id,
            "turn": episode.turn,
            "done": episode.done,
            "messages": episode.seen,
            "age_s": round(now - episode.created, 3),
            "expires_in_s": round(max(0.0, self.ttl_s - (now - episode.last_active)), 3),
        }
        if episode.done and episode.result is not None:
            data["termination"] = episode.result.termination
            data["reward"] = 1.0 if episode.result.verdict == "pass" else (0.0 if episode.result.verdict == "fail" else None)
        return data

    def health(self) -> dict[str, Any]:
        """Pool size and open episodes."""
        with self._lock:
            open_episodes = len(self._episodes)
        return {"suite": self.suite.name, "version": self.suite.version, "pool": len(self.pool), "episodes": open_episodes}

    # -- bookkeeping -----------------------------------------------------------------------

    def _get(self, episode_id: Any, *, touch: bool = True) -> Episode:
        _field(episode_id, str, "episode_id")
        self.expire_idle()
        with self._lock:
            episode = self._episodes.get(episode_id)
            if episode is None:
                if episode_id in self._expired:
                    raise EnvError(410, f"episode {episode_id}: expired after {self.ttl_s:g} s without activity")
                raise EnvError(404, f"episode {episode_id}: unknown")
        return episode

    def expire_idle(self) -> list[str]:
        """End and forget every episode idle for longer than the TTL; returns their ids."""
        now = self.clock()
        with self._lock:
            stale = [e for e in self._episodes.values() if now - e.last_active > self.ttl_s and not e.lock.locked()]
            for episode in stale:
                del self._episodes[episode.id]
                self._expired[episode.id] = None
            while len(self._expired) > EXPIRED_MEMORY:
                self._expired.popitem(last=False)
        for episode in stale:
            _stop(episode)
        return [episode.id for episode in stale]

    def _forget(self, episode_id: str) -> None:
        with self._lock:
            self._episodes.pop(episode_id, None)

    def close(self) -> None:
        """End every open episode (their sandboxes close in their threads)."""
        with self._lock:
            episodes = list(self._episodes.values())
            self._episodes.clear()
        for episode in episodes:
            _stop(episode)


def _stop(episode: Episode) -> None:
    """Make an open episode's runner thread raise; it records infra_error and closes the sandbox."""
    if episode.done:
        return
    try:
        episode.agent.inbox.put_nowait(_STOP)
    except queue.Full:  # an action is still queued; the thread will see the stop at its next step
        pass
