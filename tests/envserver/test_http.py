"""The environment server's HTTP wire and scheduling: framing, keep-alive, errors, steps before new episodes."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

from tb_engine.loader import load_builtin_suite
from tb_engine.training import Environment
from tb_envserver import EnvServer
from tb_envserver.client import EnvClient, EnvClientError
from tb_envserver.http11 import MAX_BODY_BYTES, BadRequest, parse_head

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
    [(status, _, body)] = _responses(sock, 1)
    sock.close()
    assert (status, body) == (400, {"error": "malformed request line 'NONSENSE'"})


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


def test_parse_head_refuses_chunked_bodies():
    with pytest.raises(BadRequest) as refused:
        parse_head(b"POST /step HTTP/1.1\r\nTransfer-Encoding: chunked")
    assert (refused.value.status, refused.value.message) == (
        411,
        "request body: chunked encoding is not supported; send Content-Length",
    )


class _Recorder:
    """Stands in for a connection: records answers in order."""

    open = True

    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    def finish(self, request, answer, **_):
        self.log.append((self.name, answer[0]))


def test_envserver_steps_of_running_episodes_go_before_queued_resets():
    server = EnvServer(Environment(SUITE))
    loop = asyncio.new_event_loop()
    server._loop = loop
    try:
        started = server.env.reset(task_id=TASK)
        log: list = []
        reset = parse_head(b"POST /reset HTTP/1.1\r\nHost: t")
        step = parse_head(b"POST /step HTTP/1.1\r\nHost: t")
        body = json.dumps({"task_id": TASK}).encode()
        # Three new episodes and one step of a running episode arrive in the same loop pass.
        queued = [server.handle(_Recorder(f"reset-{i}", log), reset, body) for i in range(3)]
        action = {"episode_id": started["episode_id"], "action": {"text": "Nothing to do.", "done": True}}
        step_answer = server.handle(_Recorder("step", log), step, json.dumps(action).encode())
        log.append(("step", step_answer[0]))
        loop.call_soon(loop.stop)
        loop.run_forever()  # one pass: one queued reset starts
        after_one_pass = list(log)
        for _ in range(3):
            loop.call_soon(loop.stop)
            loop.run_forever()
    finally:
        loop.close()
        server.server_close()
        server.env.close()
    assert queued == [None, None, None]
    assert after_one_pass == [("step", 200), ("reset-0", 200)]
    assert log == [("step", 200), ("reset-0", 200), ("reset-1", 200), ("reset-2", 200)]


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
