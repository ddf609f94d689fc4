"""A small client for the training environment server (stdlib http.client, one kept-alive connection).

``rollout`` is the reference loop: it turns observations into the same ``AgentView`` the runner
builds and any engine ``Agent`` (golden, simulated, OpenAI-compatible) into actions, so a trainer
can start from it without a training framework.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tb_engine.agents.base import Agent, AgentStep, AgentView, ToolSchema
from tb_engine.transcript import Message, ToolCallRequest


class EnvClientError(Exception):
    """The server answered with an error status."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class EnvClient:
    """reset / step / state over one persistent connection (not shared between threads)."""

    def __init__(self, base_url: str, *, timeout: float = 60.0):
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"base_url: expected http://host:port, got {base_url!r}")
        self._host, self._port, self._timeout = parts.hostname, parts.port or 80, timeout
        self._connection: http.client.HTTPConnection | None = None
        self._owner = threading.get_ident()

    def _request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        if threading.get_ident() != self._owner:
            raise RuntimeError("EnvClient: one client per thread (its connection is not thread-safe)")
        body = json.dumps(payload).encode() if payload is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in (1, 2):  # one reconnect when a kept-alive socket was closed by the server
            if self._connection is None:
                self._connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            try:
                self._connection.request(method, path, body=body, headers=headers)
                response = self._connection.getresponse()
                data = json.loads(response.read() or b"{}")
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
        if response.status >= 400:
            raise EnvClientError(response.status, data.get("error", ""))
        return data

    def reset(self, *, task_id: str | None = None, seed: int | None = None) -> dict[str, Any]:
        """Start an episode: {episode_id, task_id, observation}."""
        payload = {key: value for key, value in (("task_id", task_id), ("seed", seed)) if value is not None}
        return self._request("POST", "/reset", payload)

    def step(self, episode_id: str, *, text: str = "", tool_calls: list[dict] | None = None, done: bool = False) -> dict[str, Any]:
        """One action: {observation, reward, done, info}."""
        action: dict[str, Any] = {"text": text, "tool_calls": tool_calls or [], "done": done}
        return self._request("POST", "/step", {"episode_id": episode_id, "action": action})

    def state(self, episode_id: str) -> dict[str, Any]:
        return self._request("GET", f"/state/{episode_id}")

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/health")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def message_from_observation(data: dict[str, Any]) -> Message:
    """An engine Message from an observed message dict."""
    calls = [ToolCallRequest(c["id"], c["name"], c.get("arguments")) for c in data.get("tool_calls") or []]
    return Message(
        data["role"], data.get("content") or "", tool_calls=calls, tool_call_id=data.get("tool_call_id"),
        name=data.get("name"), is_error=bool(data.get("is_error", False)),
    )  # fmt: skip


def action_from_step(step: AgentStep) -> dict[str, Any]:
    """An HTTP action from an engine AgentStep."""
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in step.tool_calls]
    return {"text": step.text, "tool_calls": calls, "done": step.done}


@dataclass
class Rollout:
    episode_id: str
    task_id: str
    reward: float | None
    steps: int
    info: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)


def rollout(client: EnvClient, make_agent, *, task_id: str | None = None, seed: int | None = None, max_steps: int = 64) -> Rollout:
    """Run one episode to the end; ``make_agent(task_id)`` returns the Agent to drive (e.g. the golden agent)."""
    started = client.reset(task_id=task_id, seed=seed)
    observation = started["observation"]
    tools = [ToolSchema(t["name"], t["description"], t["parameters"], t.get("read_only", False)) for t in observation["tools"]]
    messages = [message_from_observation(m) for m in observation["messages"]]
    agent: Agent = make_agent(started["task_id"])
    timings: list[float] = []
    for turn in range(max_steps):
        step = agent.step(AgentView(observation["policy"], tools, list(messages), turn))
        messages.append(Message("assistant", step.text, tool_calls=list(step.tool_calls), turn=turn))
        began = time.perf_counter()
        answer = client.step(started["episode_id"], **action_from_step(step))
        timings.append(time.perf_counter() - began)
        messages.extend(message_from_observation(m) for m in answer["observation"]["messages"])
        if answer["done"]:
            return Rollout(started["episode_id"], started["task_id"], answer["reward"], turn + 1, answer["info"], messages, timings)
    raise RuntimeError(f"episode {started['episode_id']}: not done after {max_steps} steps")
