"""The HTTP front of the training environment (OpenEnv style): a Starlette app over ``Environment``.

POST /reset {task_id?, seed?, episode_id?} -> {episode_id, task_id, observation: {policy, tools, messages}}
POST /step  {episode_id, action}         -> {observation, reward, done, info}
POST /close {episode_id}                 -> {episode_id, closed, was_open}: ends it now, sandbox back
GET  /state/{episode_id}                 -> where the episode stands
GET  /health                             -> pool size, open and finished episodes
The OpenEnv protocol (``/ws`` sessions, ``/mcp`` JSON-RPC, ``/schema``, ``/metadata``, ``GET
/state``) is served by the same app from ``openenv.py``.
Errors are JSON {"error": "..."} with a 4xx/5xx status; bodies over MAX_BODY_BYTES get 413 and
the connection is closed. uvicorn serves it (``server.py``), keeping connections alive across steps.

For SQLite suites with local judge and user each step runs inline on the event loop: it is CPU
work on a suspended generator, so there is nothing to wait for and no thread to hand off to. When
the environment is ``blocking`` (MCP server processes, an LLM judge or user) resets and steps run
in a thread pool instead (``Calls``), so the loop keeps answering while they wait.
Resets wait in ``ResetQueue``: every loop pass answers the steps that have arrived and starts at
most one new episode, so under overload the wait moves to /reset instead of to every running
episode's steps. With ``peers`` the app is one of several worker processes: a request for another
worker's episode is relayed to it, and requests arriving on this worker's private port (its
peers' relays) are always answered here.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from tb_engine.training.environment import EnvError, Environment
from tb_envserver.bodies import MAX_BODY_BYTES, BodyTooLarge, json_response, parse_body, read_body
from tb_envserver.calls import Calls
from tb_envserver.openenv import OpenEnvFront
from tb_envserver.relay import Peers, PeerUnavailable

__all__ = ["MAX_BODY_BYTES", "create_app", "openapi_document"]


Endpoint = Callable[[Request], Awaitable[Response]]


def answered(endpoint: Endpoint) -> Endpoint:
    """Every failure of ``endpoint`` becomes a JSON error answer (a harness bug must still answer,
    or the trainer hangs on its socket)."""

    async def wrapper(request: Request) -> Response:
        try:
            return await endpoint(request)
        except EnvError as exc:
            return json_response(exc.status, {"error": exc.message})
        except BodyTooLarge as exc:
            return json_response(413, {"error": str(exc)}, close=True)
        except Exception as exc:
            return json_response(500, {"error": f"{type(exc).__name__}: {exc}"})

    return wrapper


def create_app(env: Environment, *, peers: Peers | None = None) -> Starlette:
    """The ASGI app serving ``env``; with ``peers``, one worker of several (see module docstring)."""
    calls = Calls(env)
    front = OpenEnvFront(env, calls)

    def from_peer(request: Request) -> bool:
        """The request came in on this worker's private port: a relay, always answered here."""
        server = request.scope.get("server")
        return peers is not None and server is not None and server[1] == peers.private_port

    def owner_elsewhere(request: Request, episode_id: Any) -> int | None:
        if peers is None or from_peer(request):
            return None
        return peers.owner_elsewhere(episode_id)

    async def relay(owner: int, request: Request, body: bytes) -> Response:
        assert peers is not None  # only called for an owner that owner_elsewhere found among the peers
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            status, payload = await peers.relay(owner, request.method, target, body)
        except PeerUnavailable as exc:
            return json_response(
                502, {"error": f"worker {owner}, which owns this episode, is unavailable: {exc}"}
            )
        return json_response(status, payload)

    @answered
    async def reset(request: Request) -> Response:
        data = parse_body(await read_body(request))
        unknown = sorted(set(data) - {"task_id", "seed", "episode_id"})
        if unknown:
            raise EnvError(400, f"reset: unknown field(s) {', '.join(unknown)}")
        return json_response(200, await calls.reset(**data))

    @answered
    async def step(request: Request) -> Response:
        body = await read_body(request)
        data = parse_body(body)
        if "episode_id" not in data or "action" not in data:
            raise EnvError(400, "step: episode_id and action are required")
        owner = owner_elsewhere(request, data["episode_id"])
        if owner is not None:
            return await relay(owner, request, body)
        return json_response(200, await calls.run(env.step, data["episode_id"], data["action"]))

    @answered
    async def close(request: Request) -> Response:
        body = await read_body(request)
        data = parse_body(body)
        if set(data) != {"episode_id"}:
            raise EnvError(400, "close: expected exactly {episode_id}")
        owner = owner_elsewhere(request, data["episode_id"])
        if owner is not None:
            return await relay(owner, request, body)
        return json_response(200, await calls.run(env.close_episode, data["episode_id"]))

    @answered
    async def state(request: Request) -> Response:
        episode_id = request.path_params["episode_id"]
        owner = owner_elsewhere(request, episode_id)
        if owner is not None:
            return await relay(owner, request, b"")
        return json_response(200, env.state(episode_id))

    @answered
    async def health(request: Request) -> Response:
        if peers is None or from_peer(request):
            return json_response(200, dict(env.health(), status="healthy"))
        totals = dict(env.health(), status="healthy", workers=peers.count)
        for peer in peers.others():  # /health over all workers: open and finished episodes summed
            try:
                status, payload = await peers.relay(peer, "GET", "/health", b"")
            except PeerUnavailable as exc:
                return json_response(502, {"error": f"worker {peer} is unavailable: {exc}"})
            other = json.loads(payload)
            totals["episodes"] += other["episodes"]
            totals["finished"] += other["finished"]
        return json_response(200, totals)

    async def no_such_endpoint(request: Request, exc: Exception) -> Response:
        return json_response(404, {"error": f"{request.method} {request.url.path}: no such endpoint"})

    routes = [
        Route("/reset", reset, methods=["POST"]),
        Route("/step", step, methods=["POST"]),
        Route("/close", close, methods=["POST"]),
        Route("/state/{episode_id:path}", state, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/state", answered(front.state), methods=["GET"]),
        Route("/schema", answered(front.schema), methods=["GET"]),
        Route("/metadata", answered(front.metadata), methods=["GET"]),
        Route("/mcp", front.mcp_http, methods=["POST"]),
        WebSocketRoute("/ws", front.websocket),
    ]

    # openenv's runtime validator (`openenv validate --url`) reads the version and the endpoint set
    # (simulation mode: /reset, /step and /state) from /openapi.json; it is built from the routes
    # above, so it cannot drift from what is served.
    document = openapi_document(routes, version=env.suite.version)

    async def openapi(request: Request) -> Response:
        return json_response(200, document)

    routes.append(Route("/openapi.json", openapi, methods=["GET"]))
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        HTTPException: no_such_endpoint  # 404 and 405: any other method or path
    }
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.router.redirect_slashes = False  # "/step/" is no endpoint, not a redirect
    return app


def openapi_document(routes: list[BaseRoute], *, version: str) -> dict[str, Any]:
    """A minimal OpenAPI 3.1 document naming every HTTP route and its methods (docs/training.md has the bodies)."""
    paths: dict[str, Any] = {}
    for route in routes:
        if isinstance(route, Route):
            methods = sorted(m.lower() for m in route.methods or () if m != "HEAD")
            paths[route.path] = {m: {"responses": {"200": {"description": "JSON"}}} for m in methods}
    return {
        "openapi": "3.1.0",
        "info": {"title": "ThinkingBox Web training environment", "version": version},
        "paths": paths,
    }
