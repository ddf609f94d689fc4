"""The OpenEnv protocol over the same episodes: what the unmodified ``openenv-core`` clients speak.

* ``/ws``: one WebSocket is one session. Client messages ``{"type": "reset"|"step"|"state"|"close"|"mcp",
  "data": …}``; answers ``{"type": "observation"|"state"|"mcp"|"error", "data": …}``. ``reset``
  takes ``{seed?, episode_id?, task_id?}`` and starts a new episode (ending the session's previous
  one); ``step`` takes our action ``{text?, tool_calls?, done?}`` or an MCP action ``{"type":
  "call_tool", tool_name, arguments}`` / ``{"type": "list_tools"}``. Closing the socket (or a
  ``close`` message) ends the open episode at once: its sandbox or server process goes back.
* ``POST /mcp``: JSON-RPC 2.0 — ``openenv/session/create`` (an episode; params ``{task_id?, seed?}``),
  ``tools/list``, ``tools/call`` (with ``session_id``), ``openenv/session/close``.
* ``GET /schema``, ``GET /metadata``, ``GET /state`` (``?episode_id=`` for one episode).

MCP clients have no way to send plain text, so the tool list carries one reserved tool,
``reply_to_user {message, done?}``: a text reply (the simulated user's answer comes back as its
result) and, with ``done``, the agent's final reply, which is then graded (and judged).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from tb_engine.training.environment import EnvError, Environment
from tb_envserver.bodies import BodyTooLarge, json_response, read_body
from tb_envserver.calls import Calls

REPLY_TOOL = "reply_to_user"
REPLY_TOOL_SCHEMA: dict[str, Any] = {
    "name": REPLY_TOOL,
    "description": (
        "Send a text message to the user. The user's answer is returned. Set done to true for your "
        "final reply: the episode then ends and is graded."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "what to tell the user"},
            "done": {"type": "boolean", "description": "true for the final reply (ends the episode)"},
        },
        "required": ["message"],
    },
}
# JSON-RPC 2.0 error codes
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, SERVER_ERROR = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32000,
)

ACTION_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "title": "AgentAction",
            "properties": {
                "text": {"type": "string"},
                "tool_calls": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "name": {"type": "string"},
                            "arguments": {"type": ["object", "string"]},
                        },
                        "required": ["name"],
                    },
                },
                "done": {"type": "boolean"},
            },
        },
        {
            "type": "object",
            "title": "CallToolAction",
            "properties": {
                "type": {"const": "call_tool"},
                "tool_name": {"type": "string"},
                "arguments": {"type": "object"},
            },
            "required": ["type", "tool_name"],
        },
        {"type": "object", "title": "ListToolsAction", "properties": {"type": {"const": "list_tools"}}},
    ]
}
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {"enum": ["user", "tool", "system"]},
        "content": {"type": "string"},
        "tool_call_id": {"type": "string"},
        "name": {"type": "string"},
        "is_error": {"type": "boolean"},
    },
}
OBSERVATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "policy": {"type": "string", "description": "the system prompt (reset only)"},
        "tools": {"type": "array", "description": "the task's tools (reset and list_tools)"},
        "messages": {"type": "array", "items": MESSAGE_SCHEMA, "description": "what is new to the agent"},
        "turn": {"type": "integer"},
        "tool_name": {"type": "string", "description": "call_tool actions: the tool called"},
        "result": {"description": "call_tool actions: the tool's result text"},
        "info": {"type": "object", "description": "at the end: verdict, diff counts, check outcomes"},
        "metadata": {"type": "object", "description": "episode_id, task_id"},
    },
}
STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "episode_id": {"type": ["string", "null"]},
        "step_count": {"type": "integer"},
        "task_id": {"type": "string"},
        "done": {"type": "boolean"},
        "reward": {"type": ["number", "null"]},
    },
}


class ProtocolError(Exception):
    """A message the OpenEnv front refuses (answered as an error, the session stays open)."""

    code = INVALID_PARAMS


class MethodNotFound(ProtocolError):
    code = METHOD_NOT_FOUND


def openenv_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """One of our tool entries in MCP's shape (``inputSchema``), keeping ``read_only``."""
    return {
        "name": tool["name"],
        "description": tool["description"],
        "inputSchema": tool["parameters"],
        "read_only": tool.get("read_only", False),
    }


def translate_action(data: Any) -> tuple[str, dict[str, Any] | None]:
    """An OpenEnv step payload -> ("list_tools", None) or (tool name or "", our action)."""
    if not isinstance(data, dict):
        raise EnvError(400, f"step data: expected a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "list_tools":
        return "list_tools", None
    if kind == "call_tool":
        name, arguments = data.get("tool_name"), data.get("arguments") or {}
        if not isinstance(name, str) or not name:
            raise EnvError(400, "call_tool.tool_name: a non-empty tool name is required")
        if not isinstance(arguments, dict):
            raise EnvError(400, f"call_tool.arguments: expected object, got {type(arguments).__name__}")
        return name, tool_action(name, arguments)
    if kind is not None:
        raise EnvError(400, f"step data.type: {kind!r} is not call_tool or list_tools")
    return "", data


def tool_action(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool call as our action; the reserved reply tool becomes a text reply."""
    if name == REPLY_TOOL:
        message = arguments.get("message")
        if not isinstance(message, str) or not message:
            raise EnvError(400, f"{REPLY_TOOL}.message: a non-empty string is required")
        done = arguments.get("done", False)
        if not isinstance(done, bool):
            raise EnvError(400, f"{REPLY_TOOL}.done: expected boolean, got {type(done).__name__}")
        return {"text": message, "done": done}
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def tool_result(name: str, answer: dict[str, Any]) -> tuple[Any, bool]:
    """What a call_tool returns: the tool's result text (is_error), or for the reply tool the user's answer."""
    messages = answer["observation"]["messages"]
    if name == REPLY_TOOL:
        replies = [m["content"] for m in messages if m["role"] == "user"]
        return {
            "user": "\n".join(replies),
            "done": answer["done"],
            "reward": answer["reward"],
            "info": answer.get("info", {}),
        }, False
    results = [m for m in messages if m["role"] == "tool"]
    if not results:  # the call was refused before it ran (e.g. a limit ended the episode)
        return "\n".join(m["content"] for m in messages), True
    return results[-1]["content"], bool(results[-1].get("is_error"))


class Session:
    """One OpenEnv session (a WebSocket, or an HTTP MCP session): at most one open episode."""

    def __init__(self, env: Environment, calls: Calls):
        self.env, self.calls = env, calls
        self.episode_id: str | None = None
        self.tools: list[dict[str, Any]] = []
        self.done = False

    async def reset(self, data: Any) -> dict[str, Any]:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise EnvError(400, f"reset data: expected a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"task_id", "seed", "episode_id"})
        if unknown:
            raise EnvError(
                400, f"reset: unknown field(s) {', '.join(unknown)} (use task_id, seed, episode_id)"
            )
        await self.close()
        started = await self.calls.reset(**data)
        self.episode_id, self.done = started["episode_id"], False
        observation = started["observation"]
        self.tools = [openenv_tool(t) for t in observation["tools"]] + [REPLY_TOOL_SCHEMA]
        metadata = {"episode_id": self.episode_id, "task_id": started["task_id"]}
        return {
            "observation": dict(observation, tools=self.tools, metadata=metadata),
            "reward": None,
            "done": False,
        }

    def _open(self) -> str:
        if self.episode_id is None:
            raise EnvError(409, "no episode in this session: send reset first")
        return self.episode_id

    async def step(self, data: Any) -> dict[str, Any]:
        episode_id = self._open()
        name, action = translate_action(data)
        if action is None:  # list_tools: no turn taken
            return {"observation": {"tools": self.tools}, "reward": None, "done": self.done}
        answer = await self.calls.run(self.env.step, episode_id, action)
        self.done = answer["done"]
        observation = dict(answer["observation"], metadata={"episode_id": episode_id})
        if answer["done"]:
            observation["info"] = answer["info"]
        if name:
            result, is_error = tool_result(name, answer)
            observation.update(tool_name=name, result=result, error=None, is_error=is_error)
        return {"observation": observation, "reward": answer["reward"], "done": answer["done"]}

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """tools/call: an MCP CallToolResult (text content), with ``data`` for openenv's client."""
        episode_id = self._open()
        answer = await self.calls.run(self.env.step, episode_id, tool_action(name, arguments))
        self.done = answer["done"]
        result, is_error = tool_result(name, answer)
        text = result if isinstance(result, str) else json.dumps(result)
        return {
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
            "data": result,
            "reward": answer["reward"],
            "done": answer["done"],
        }

    def state(self) -> dict[str, Any]:
        if self.episode_id is None:
            return {"episode_id": None, "step_count": 0}
        return self.env.state(self.episode_id)

    async def close(self) -> None:
        """End the open episode, if any (a finished one only drops its record)."""
        episode_id, self.episode_id = self.episode_id, None
        if episode_id is not None:
            try:
                await self.calls.run(self.env.close_episode, episode_id)
            except EnvError:  # already expired: nothing left to free
                pass


def rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def rpc_result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


class OpenEnvFront:
    """The OpenEnv endpoints over one Environment (see the module docstring)."""

    def __init__(self, env: Environment, calls: Calls):
        self.env, self.calls = env, calls
        self.mcp_sessions: dict[str, Session] = {}  # HTTP MCP sessions by session id (= episode id)

    # -- plain GETs ------------------------------------------------------------------------

    async def schema(self, request: Request) -> Response:
        return json_response(
            200, {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}
        )

    async def metadata(self, request: Request) -> Response:
        suite = self.env.suite
        return json_response(
            200,
            {
                "name": "thinkingbox-web",
                "description": (
                    f"Tool-using agent episodes of suite {suite.name} v{suite.version}: the reward is the "
                    "grader's verdict on the end state (1.0 pass, 0.0 fail)."
                ),
                "version": suite.version,
                "suite": suite.name,
                "domains": sorted({suite.tasks[t].domain for t in self.env.pool}),
                "pool": len(self.env.pool),
                "documentation_url": "docs/training.md",
            },
        )

    async def state(self, request: Request) -> Response:
        episode_id = request.query_params.get("episode_id")
        if episode_id:
            return json_response(200, self.env.state(episode_id))
        health = self.env.health()
        return json_response(
            200,
            {
                "episode_id": None,
                "step_count": 0,
                "open_episodes": health["episodes"],
                "finished": health["finished"],
            },
        )

    # -- /ws -------------------------------------------------------------------------------

    async def websocket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        session = Session(self.env, self.calls)
        try:
            while True:
                raw = await websocket.receive_text()
                answer = await self._ws_answer(session, raw)
                if answer is None:  # close
                    break
                await websocket.send_text(json.dumps(answer, default=str))
        except WebSocketDisconnect:
            pass
        finally:
            await session.close()  # the socket is gone: its episode ends now, not at the TTL
        try:
            await websocket.close()
        except RuntimeError:  # already closed by the client
            pass

    async def _ws_answer(self, session: Session, raw: str) -> dict[str, Any] | None:
        try:
            message = json.loads(raw)
        except ValueError as exc:
            return {"type": "error", "data": {"message": f"invalid JSON: {exc}", "code": "INVALID_JSON"}}
        if not isinstance(message, dict):
            return {"type": "error", "data": {"message": "expected a JSON object", "code": "INVALID_JSON"}}
        kind = message.get("type")
        try:
            if kind == "reset":
                return {"type": "observation", "data": await session.reset(message.get("data"))}
            if kind == "step":
                return {"type": "observation", "data": await session.step(message.get("data"))}
            if kind == "state":
                return {"type": "state", "data": session.state()}
            if kind == "close":
                return None
            if kind == "mcp":
                return {"type": "mcp", "data": await self._rpc(message.get("data"), session=session)}
        except EnvError as exc:
            return {"type": "error", "data": {"message": exc.message, "code": f"HTTP_{exc.status}"}}
        except Exception as exc:  # a harness bug must still answer, or the client waits for ever
            return {
                "type": "error",
                "data": {"message": f"{type(exc).__name__}: {exc}", "code": "EXECUTION_ERROR"},
            }
        return {
            "type": "error",
            "data": {"message": f"unknown message type: {kind!r}", "code": "UNKNOWN_TYPE"},
        }

    # -- /mcp ------------------------------------------------------------------------------

    async def mcp_http(self, request: Request) -> Response:
        try:
            raw = await read_body(request)
        except BodyTooLarge as exc:
            return json_response(413, rpc_error(None, INVALID_REQUEST, str(exc)), close=True)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            return json_response(200, rpc_error(None, PARSE_ERROR, f"parse error: {exc}"))
        return json_response(200, await self._rpc(data, session=None))

    async def _rpc(self, data: Any, *, session: Session | None) -> dict[str, Any]:
        """One JSON-RPC request; ``session`` is the WebSocket's own (HTTP requests name theirs)."""
        if (
            not isinstance(data, dict)
            or data.get("jsonrpc") != "2.0"
            or not isinstance(data.get("method"), str)
        ):
            return rpc_error(
                None, INVALID_REQUEST, "invalid request: expected {jsonrpc: '2.0', method, params?, id?}"
            )
        request_id, method, params = data.get("id"), data["method"], data.get("params") or {}
        if not isinstance(params, dict):
            return rpc_error(request_id, INVALID_PARAMS, "params: expected an object")
        try:
            return rpc_result(request_id, await self._rpc_method(method, params, session))
        except ProtocolError as exc:
            return rpc_error(request_id, exc.code, str(exc))
        except EnvError as exc:
            code = INVALID_PARAMS if exc.status in (400, 404, 409, 410) else SERVER_ERROR
            return rpc_error(request_id, code, exc.message)

    async def _rpc_method(
        self, method: str, params: dict[str, Any], session: Session | None
    ) -> dict[str, Any]:
        if method == "openenv/session/create":
            if session is not None:  # a WebSocket is a session already
                return {"session_id": session.episode_id}
            for stale in [k for k in self.mcp_sessions if not self.env.is_open(k)]:
                del self.mcp_sessions[stale]  # expired or finished episodes: their sessions go too
            session = Session(self.env, self.calls)
            started = await session.reset({k: v for k, v in params.items() if k in ("task_id", "seed")})
            assert session.episode_id is not None
            self.mcp_sessions[session.episode_id] = session
            return {"session_id": session.episode_id, "observation": started["observation"]}
        if method == "openenv/session/close":
            session_id = params.get("session_id")
            target = self.mcp_sessions.pop(session_id, None) if isinstance(session_id, str) else None
            if target is None:
                raise ProtocolError(f"session_id: unknown session {session_id!r}")
            await target.close()
            return {"session_id": session_id, "closed": True}
        if method not in ("tools/list", "tools/call"):
            raise MethodNotFound(f"method not found: {method}")
        if session is None:
            session_id = params.get("session_id")
            session = self.mcp_sessions.get(session_id) if isinstance(session_id, str) else None
            if session is None:
                raise ProtocolError(
                    "session_id: required (tools differ per task): call openenv/session/create first"
                    if session_id is None
                    else f"session_id: unknown session {session_id!r}"
                )
        if method == "tools/list":
            session._open()
            return {"tools": session.tools}
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not name:
            raise ProtocolError("name: a non-empty tool name is required")
        if not isinstance(arguments, dict):
            raise ProtocolError(f"arguments: expected object, got {type(arguments).__name__}")
        return await session.call_tool(name, arguments)
