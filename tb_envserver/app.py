"""The HTTP front of the training environment (OpenEnv style): a Starlette app over ``Environment``.

POST /reset {task_id?, seed?}            -> {episode_id, task_id, observation: {policy, tools, messages}}
POST /step  {episode_id, action}         -> {observation, reward, done, info}
GET  /state/{episode_id}                 -> where the episode stands
GET  /health                             -> pool size, open and finished episodes
Errors are JSON {"error": "..."} with a 4xx/5xx status; bodies over MAX_BODY_BYTES get 413 and
the connection is closed. uvicorn serves it (``server.py``), keeping connections alive across steps.

Each step runs inline on the event loop: it is CPU work on a suspended generator, so there is
nothing to wait for and no thread to hand off to (a ``def`` endpoint would run in a thread pool).
Resets wait in ``ResetQueue``: every loop pass answers the steps that have arrived and starts at
most one new episode, so under overload the wait moves to /reset instead of to every running
episode's steps. With ``peers`` the app is one of several worker processes: a request for another
worker's episode is relayed to it, and requests arriving on this worker's private port (its
peers' relays) are always answered here.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tb_engine.training.environment import EnvError, Environment
from tb_envserver.relay import Peers, PeerUnavailable

MAX_BODY_BYTES = 1 << 20


def json_response(status: int, payload: dict[str, Any] | bytes, *, close: bool = False) -> Response:
    """A JSON answer; bytes are JSON already (an answer relayed from a peer)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload, default=str).encode()
    # Connection: close makes uvicorn drop the connection after answering (an unread body).
    headers = {"connection": "close"} if close else None
    return Response(body, status_code=status, media_type="application/json", headers=headers)


class BodyTooLarge(Exception):
    def __init__(self, size: int):
        super().__init__(f"request body: {size} bytes exceeds {MAX_BODY_BYTES}")


async def read_body(request: Request) -> bytes:
    """The request body, refused past MAX_BODY_BYTES before reading when Content-Length says so."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise BodyTooLarge(int(declared))
        return await request.body()
    chunks, size = [], 0
    async for chunk in request.stream():  # chunked transfer encoding
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BodyTooLarge(size)
        chunks.append(chunk)
    return b"".join(chunks)


def parse_body(raw: bytes) -> dict[str, Any]:
    """A JSON object from the body (empty body: {}); anything else is a 400 naming the problem."""
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise EnvError(400, f"request body: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise EnvError(400, "request body: expected a JSON object")
    return data


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


class ResetQueue:
    """/reset requests wait here and start one per event-loop pass, after the steps that have arrived.

    ``submit`` queues a reset and returns the future of its answer; the first reset of an empty
    queue schedules ``_start_one``, which starts one episode and, while more wait, schedules itself
    again behind everything already ready to run (the steps that arrived meanwhile). No reset
    starves: one is started on every pass.
    """

    def __init__(self, env: Environment):
        self.env = env
        self._waiting: deque[tuple[asyncio.Future[Response], dict[str, Any]]] = deque()

    def submit(self, data: dict[str, Any]) -> asyncio.Future[Response]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Response] = loop.create_future()
        self._waiting.append((future, data))
        if len(self._waiting) == 1:
            loop.call_soon(self._start_one)
        return future

    def _start_one(self) -> None:
        future, data = self._waiting.popleft()
        if self._waiting:
            future.get_loop().call_soon(self._start_one)
        if future.cancelled():  # the client went away while it waited
            return
        try:
            answer = json_response(200, self.env.reset(task_id=data.get("task_id"), seed=data.get("seed")))
        except EnvError as exc:
            answer = json_response(exc.status, {"error": exc.message})
        except Exception as exc:
            answer = json_response(500, {"error": f"{type(exc).__name__}: {exc}"})
        future.set_result(answer)


def create_app(env: Environment, *, peers: Peers | None = None) -> Starlette:
    """The ASGI app serving ``env``; with ``peers``, one worker of several (see module docstring)."""
    resets = ResetQueue(env)

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
        unknown = sorted(set(data) - {"task_id", "seed"})
        if unknown:
            raise EnvError(400, f"reset: unknown field(s) {', '.join(unknown)}")
        return await resets.submit(data)

    @answered
    async def step(request: Request) -> Response:
        body = await read_body(request)
        data = parse_body(body)
        if "episode_id" not in data or "action" not in data:
            raise EnvError(400, "step: episode_id and action are required")
        owner = owner_elsewhere(request, data["episode_id"])
        if owner is not None:
            return await relay(owner, request, body)
        return json_response(200, env.step(data["episode_id"], data["action"]))

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
            return json_response(200, env.health())
        totals = dict(env.health(), workers=peers.count)
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
        Route("/state/{episode_id:path}", state, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        HTTPException: no_such_endpoint  # 404 and 405: any other method or path
    }
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.router.redirect_slashes = False  # "/step/" is no endpoint, not a redirect
    return app
