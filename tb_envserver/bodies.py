"""JSON request bodies and answers of the environment server (shared by the REST and OpenEnv fronts)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tb_engine.training.environment import EnvError

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
