"""A small client for the training environment server (stdlib socket, one kept-alive connection).

``rollout`` is the reference loop: it turns observations into the same ``AgentView`` the runner
builds and any engine ``Agent`` (golden, simulated, OpenAI-compatible) into actions, so a trainer
can start from it without a training framework.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tb_engine.interfaces import Agent, AgentStep, AgentView, ToolSchema
from tb_engine.transcript import Message, ToolCallRequest


class EnvClientError(Exception):
    """The server answered with an error status."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class _ClosedBeforeAnswer(ConnectionError):
    """The server closed the connection without sending a byte of the response."""


class EnvClient:
    """reset / step / state over one persistent connection (not shared between threads).

    HTTP/1.1 is spoken directly over a socket: http.client's header parsing (the email package) cost
    more CPU per step than the server's own work, and a trainer running many episodes pays it on
    every step. Only what the environment server sends is supported: Content-Length framed JSON.
    """

    def __init__(self, base_url: str, *, timeout: float = 60.0):
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"base_url: expected http://host:port, got {base_url!r}")
        self._host, self._port, self._timeout = parts.hostname, parts.port or 80, timeout
        self._host_header = parts.netloc
        self._socket: socket.socket | None = None
        self._buffer = bytearray()
        self._owner = threading.get_ident()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self._host, self._port), timeout=self._timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer.clear()
        return sock

    def _request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        if threading.get_ident() != self._owner:
            raise RuntimeError("EnvClient: one client per thread (its connection is not thread-safe)")
        body = json.dumps(payload).encode() if payload is not None else b""
        content_type = "Content-Type: application/json\r\n" if payload is not None else ""
        message = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host_header}\r\n{content_type}Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        reused = self._socket is not None
        try:
            status, data = self._exchange(message)
        except (_ClosedBeforeAnswer, ConnectionResetError, BrokenPipeError):
            self.close()
            if not reused:
                raise
            # A kept-alive connection the server had already closed (idle, or restarted): the request
            # never reached it, so sending it again on a fresh connection cannot apply it twice.
            status, data = self._exchange(message)
        if status >= 400:
            raise EnvClientError(status, data.get("error", ""))
        return data

    def _exchange(self, message: bytes) -> tuple[int, dict[str, Any]]:
        if self._socket is None:
            self._socket = self._connect()
        self._socket.sendall(message)
        while True:
            status, close, body = self._read_response()
            if status >= 200:  # skip interim 1xx answers
                break
        if close:
            self.close()
        return status, json.loads(body or b"{}")

    def _read_response(self) -> tuple[int, bool, bytes]:
        """(status, server closes the connection, body) of the next response on the socket."""
        buffer = self._buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if not self._receive():
                if buffer:
                    raise ConnectionResetError("connection closed in the middle of a response head")
                raise _ClosedBeforeAnswer("connection closed before the response")
        lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        del buffer[: end + 4]
        status = int(lines[0].split(" ", 2)[1])
        length, close = None, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection":
                close = value.strip().lower() == "close"
        if length is None:  # no framing: the body runs to the end of the connection
            while self._receive():
                pass
            length, close = len(buffer), True
        while len(buffer) < length:
            if not self._receive():
                raise ConnectionResetError(f"connection closed after {len(buffer)} of {length} body bytes")
        body = bytes(buffer[:length])
        del buffer[:length]
        return status, close, body

    def _receive(self) -> bool:
        """Append what the socket has to the buffer; False at end of stream."""
        if self._socket is None:
            raise ConnectionResetError("not connected")
        chunk = self._socket.recv(1 << 16)
        self._buffer += chunk
        return bool(chunk)

    def reset(self, *, task_id: str | None = None, seed: int | None = None) -> dict[str, Any]:
        """Start an episode: {episode_id, task_id, observation}."""
        payload = {key: value for key, value in (("task_id", task_id), ("seed", seed)) if value is not None}
        return self._request("POST", "/reset", payload)

    def step(
        self, episode_id: str, *, text: str = "", tool_calls: list[dict] | None = None, done: bool = False
    ) -> dict[str, Any]:
        """One action: {observation, reward, done, info}."""
        action: dict[str, Any] = {"text": text, "tool_calls": tool_calls or [], "done": done}
        return self._request("POST", "/step", {"episode_id": episode_id, "action": action})

    def state(self, episode_id: str) -> dict[str, Any]:
        return self._request("GET", f"/state/{episode_id}")

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/health")

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._buffer.clear()


def message_from_observation(data: dict[str, Any]) -> Message:
    """An engine Message from an observed message dict."""
    calls = [ToolCallRequest(c["id"], c["name"], c.get("arguments")) for c in data.get("tool_calls") or []]
    return Message(
        data["role"],
        data.get("content") or "",
        tool_calls=calls,
        tool_call_id=data.get("tool_call_id"),
        name=data.get("name"),
        is_error=bool(data.get("is_error", False)),
    )


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
    reset_seconds: float = 0.0


def rollout(
    client: EnvClient,
    make_agent: Callable[[str], Agent],
    *,
    task_id: str | None = None,
    seed: int | None = None,
    max_steps: int = 64,
) -> Rollout:
    """Run one episode to the end; ``make_agent(task_id)`` returns the Agent to drive (e.g. the golden agent)."""
    began = time.perf_counter()
    started = client.reset(task_id=task_id, seed=seed)
    reset_seconds = time.perf_counter() - began
    observation = started["observation"]
    tools = [
        ToolSchema(t["name"], t["description"], t["parameters"], t.get("read_only", False))
        for t in observation["tools"]
    ]
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
            return Rollout(
                started["episode_id"],
                started["task_id"],
                answer["reward"],
                turn + 1,
                answer["info"],
                messages,
                timings,
                reset_seconds,
            )
    raise RuntimeError(f"episode {started['episode_id']}: not done after {max_steps} steps")


def __getattr__(name: str) -> Any:
    """``ThinkingboxEnv``: the client class openenv's discovery names for our manifest
    (``tb_envserver/openenv.yaml``: env ``thinkingbox_env`` -> ``tb_envserver.client.ThinkingboxEnv``).

    It is openenv-core's own ``GenericEnvClient`` (dict actions and observations). Built on first use
    so that importing this module does not need openenv-core (a training extra)."""
    if name == "ThinkingboxEnv":
        from openenv import GenericEnvClient  # type: ignore[import-untyped]  # noqa: PLC0415 — optional dependency

        cls = type("ThinkingboxEnv", (GenericEnvClient,), {"__module__": __name__})
        globals()[name] = cls  # one class, not a new one per lookup
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
