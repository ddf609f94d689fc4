"""The environment server over HTTP (uvicorn): framing, keep-alive, errors, steps before new episodes."""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time

import pytest

from tb_engine.loader import load_builtin_suite
from tb_engine.training import Environment
from tb_envserver import EnvServer
from tb_envserver.app import MAX_BODY_BYTES, create_app
from tb_envserver.client import EnvClient, EnvClientError

SUITE = load_builtin_suite()
TASK = "retail/ticket_hold_carrier_exception"


@pytest.fixture
def server():
    started = EnvServer(Environment(SUITE))
    started.start_background()
    yield started
    started.shutdown_all()


def _connect(server: EnvServer) -> socket.socket:
    sock = socket.create_connection(server.server_address[:2], timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _request(method: str, path: str, body: bytes = b"", headers: str = "") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode() + body
    )


def _responses(sock: socket.socket, count: int) -> list[tuple[int, dict, dict]]:
    """Read ``count`` responses: (status, lower-cased headers, JSON body)."""
    buffer, answers = b"", []
    while len(answers) < count:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {len(answers)} response(s)"
            buffer += chunk
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers["content-length"])
        while len(buffer) < length:
            buffer += sock.recv(65536)
        answers.append((int(lines[0].split()[1]), headers, json.loads(buffer[:length])))
        buffer = buffer[length:]
    return answers


def test_envserver_http_pipelined_requests_are_answered_in_order(server):
    sock = _connect(server)
    reset = json.dumps({"task_id": TASK}).encode()
    # A reset (answered later, from the reset queue) followed on the same connection by requests
    # answered at once: the answers must still come back in request order.
    sock.sendall(_request("POST", "/reset", reset) + _request("GET", "/health") + _request("GET", "/nowhere"))
    answers = _responses(sock, 3)
    sock.close()
    assert [status for status, _, _ in answers] == [200, 200, 404]
    assert answers[0][2]["task_id"] == TASK
    assert answers[1][2]["episodes"] == 1
    assert answers[2][2] == {"error": "GET /nowhere: no such endpoint"}


def test_envserver_http_keeps_one_connection_for_a_whole_episode(server):
    sock = _connect(server)
    sock.sendall(_request("POST", "/reset", json.dumps({"task_id": TASK}).encode()))
    [(_, _, started)] = _responses(sock, 1)
    action = {"episode_id": started["episode_id"], "action": {"text": "I will leave it as is.", "done": True}}
    sock.sendall(_request("POST", "/step", json.dumps(action).encode()))
    [(status, headers, answer)] = _responses(sock, 1)
    sock.sendall(_request("GET", f"/state/{started['episode_id']}"))
    [(_, _, state)] = _responses(sock, 1)
    sock.close()
    assert (status, answer["done"], answer["reward"]) == (200, True, 0.0)
    assert "connection" not in headers
    assert (state["done"], state["reward"], state["turn"]) == (True, 0.0, 1)


def test_envserver_http_connection_close_is_honoured(server):
    sock = _connect(server)
    sock.sendall(_request("GET", "/health", headers="Connection: close\r\n"))
    [(status, headers, _)] = _responses(sock, 1)
    rest = sock.recv(100)
    sock.close()
    assert (status, headers["connection"], rest) == (200, "close", b"")


def test_envserver_http_oversized_body_is_413_and_the_connection_closes(server):
    sock = _connect(server)
    sock.sendall(f"POST /step HTTP/1.1\r\nHost: t\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode())
    [(status, _, body)] = _responses(sock, 1)
    rest = sock.recv(100)
    sock.close()
    assert (status, body) == (
        413,
        {"error": f"request body: {MAX_BODY_BYTES + 1} bytes exceeds {MAX_BODY_BYTES}"},
    )
    assert rest == b""


def test_envserver_http_bad_json_and_bad_request_line(server):
    sock = _connect(server)
    sock.sendall(_request("POST", "/step", b"{not json"))
    [(status, _, body)] = _responses(sock, 1)
    assert status == 400
    assert body["error"].startswith("request body: not valid JSON:")
    sock.sendall(b"NONSENSE\r\n\r\n")
    answer = b""
    while chunk := sock.recv(65536):  # uvicorn answers a request it cannot parse, then closes
        answer += chunk
    sock.close()
    assert answer.split(b"\r\n", 1)[0] == b"HTTP/1.1 400 Bad Request"


def test_envserver_http_expect_continue_gets_100_before_the_body(server):
    sock = _connect(server)
    body = json.dumps({"task_id": TASK}).encode()
    sock.sendall(
        f"POST /reset HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode()
    )
    interim = sock.recv(100)
    sock.sendall(body)
    [(status, _, started)] = _responses(sock, 1)
    sock.close()
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert (status, started["task_id"]) == (200, TASK)


def test_envserver_http_chunked_body_is_read(server):
    sock = _connect(server)
    body = json.dumps({"task_id": TASK}).encode()
    head = b"POST /reset HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:]))
    sock.sendall(head + chunks + b"0\r\n\r\n")
    [(status, _, started)] = _responses(sock, 1)
    sock.close()
    assert (status, started["task_id"]) == (200, TASK)


def test_envserver_http_oversized_chunked_body_is_413(server):
    sock = _connect(server)
    part = b"x" * (MAX_BODY_BYTES // 2 + 1)
    head = b"POST /step HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    sock.sendall(head + b"".join(b"%x\r\n%s\r\n" % (len(part), part) for _ in range(2)) + b"0\r\n\r\n")
    [(status, headers, body)] = _responses(sock, 1)
    sock.close()
    assert (status, headers["connection"], body) == (
        413,
        "close",
        {"error": f"request body: {2 * len(part)} bytes exceeds {MAX_BODY_BYTES}"},
    )


def test_envserver_http_answers_are_not_held_back_by_nagle(server):
    # uvicorn writes head and body apart: without TCP_NODELAY on the accepted socket, the client's
    # delayed ACK would hold every answer back by ~40 ms.
    sock = _connect(server)
    took = []
    for _ in range(21):
        started = time.perf_counter()
        sock.sendall(_request("GET", "/health"))
        _responses(sock, 1)
        took.append(time.perf_counter() - started)
    sock.close()
    assert statistics.median(took) < 0.02


async def _call(app, method: str, path: str, payload: dict) -> tuple[int, dict]:
    """One request straight into the ASGI app, as uvicorn would make it; (status, JSON body)."""
    body = json.dumps(payload).encode()
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"content-length", str(len(body)).encode())],
        "server": ("127.0.0.1", 1),
    }
    received = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict] = []

    async def receive():
        return received.pop(0)

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def test_envserver_steps_of_running_episodes_go_before_queued_resets():
    env = Environment(SUITE)
    app = create_app(env)
    started = env.reset(task_id=TASK)
    action = {"episode_id": started["episode_id"], "action": {"text": "Nothing to do.", "done": True}}
    answered: list[tuple[str, int]] = []

    async def one(name: str, method: str, path: str, payload: dict) -> None:
        status, _ = await _call(app, method, path, payload)
        answered.append((name, status))

    async def arrive_together() -> None:
        # Three new episodes, then one step of a running episode, all in the same loop pass.
        await asyncio.gather(
            *(one(f"reset-{i}", "POST", "/reset", {"task_id": TASK}) for i in range(3)),
            one("step", "POST", "/step", action),
        )

    try:
        asyncio.run(arrive_together())
    finally:
        env.close()
    assert answered == [("step", 200), ("reset-0", 200), ("reset-1", 200), ("reset-2", 200)]


def test_envserver_reaper_expires_idle_episodes_in_real_time():
    server = EnvServer(Environment(SUITE, ttl_s=0.2))
    server.start_background()
    try:
        client = EnvClient(server.url)
        started = client.reset(task_id=TASK)
        deadline = time.monotonic() + 5
        while client.health()["episodes"] and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(EnvClientError) as gone:
            client.state(started["episode_id"])
    finally:
        server.shutdown_all()
    assert gone.value.status == 410


def test_envclient_reconnects_when_the_server_closed_an_idle_connection():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    served = []

    def serve_two_connections():
        for _ in range(2):
            conn, _ = listener.accept()
            conn.recv(65536)
            body = json.dumps({"connection": len(served)}).encode()
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            served.append(True)
            conn.close()  # as a restarted or idle-timing-out server would, without saying so

    thread = threading.Thread(target=serve_two_connections, daemon=True)
    thread.start()
    client = EnvClient(f"http://127.0.0.1:{listener.getsockname()[1]}")
    first = client.health()
    time.sleep(0.1)  # let the close reach the client
    second = client.health()
    thread.join(5)
    listener.close()
    assert (first, second) == ({"connection": 0}, {"connection": 1})
