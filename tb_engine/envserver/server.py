"""HTTP front of the training environment (OpenEnv style), stdlib only.

POST /reset {task_id?, seed?}            -> {episode_id, task_id, observation: {policy, tools, messages}}
POST /step  {episode_id, action}         -> {observation, reward, done, info}
GET  /state/{episode_id}                 -> where the episode stands
GET  /health                             -> pool size, open episodes
Errors are JSON {"error": "..."} with a 4xx/5xx status. HTTP/1.1 keep-alive, so a trainer's
connection is reused across steps.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tb_engine.envserver.episodes import EnvError, Environment

MAX_BODY_BYTES = 1 << 20
REAP_EVERY_S = 5.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, delayed ACKs add ~40 ms to every step.
    disable_nagle_algorithm = True
    server: "EnvServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, default=str).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise EnvError(413, f"request body: {length} bytes exceeds {MAX_BODY_BYTES}")
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise EnvError(400, f"request body: not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise EnvError(400, "request body: expected a JSON object")
        return data

    def _handle(self, method: str) -> None:
        env = self.server.env
        try:
            path = self.path.split("?", 1)[0].rstrip("/")
            if method == "POST" and path == "/reset":
                body = self._body()
                unknown = sorted(set(body) - {"task_id", "seed"})
                if unknown:
                    raise EnvError(400, f"reset: unknown field(s) {', '.join(unknown)}")
                self._send(200, env.reset(task_id=body.get("task_id"), seed=body.get("seed")))
            elif method == "POST" and path == "/step":
                body = self._body()
                if "episode_id" not in body or "action" not in body:
                    raise EnvError(400, "step: episode_id and action are required")
                self._send(200, env.step(body["episode_id"], body["action"]))
            elif method == "GET" and path.startswith("/state/"):
                self._send(200, env.state(path[len("/state/"):]))
            elif method == "GET" and path == "/health":
                self._send(200, env.health())
            else:
                raise EnvError(404, f"{method} {path or '/'}: no such endpoint")
        except EnvError as exc:
            self._send(exc.status, {"error": exc.message})
        except Exception as exc:  # a harness bug must still answer, or the trainer hangs on its socket
            self._send(500, {"error": f"{type(exc).__name__}: {exc}"})

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")


class EnvServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer bound to one Environment, with a background reaper for idle episodes."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, env: Environment, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False):
        super().__init__((host, port), _Handler)
        self.env = env
        self.verbose = verbose
        self._stop_reaper = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name="episode-reaper", daemon=True)
        self._reaper.start()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def _reap(self) -> None:
        interval = min(REAP_EVERY_S, max(self.env.ttl_s / 4, 0.05))
        while not self._stop_reaper.wait(interval):
            self.env.expire_idle()

    def start_background(self) -> threading.Thread:
        """Serve in a daemon thread (tests, benchmarks); stop with shutdown_all()."""
        thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, name="envserver", daemon=True)
        thread.start()
        return thread

    def shutdown_all(self) -> None:
        """Stop serving, stop the reaper and end every open episode."""
        self._stop_reaper.set()
        self.shutdown()
        self.server_close()
        self.env.close()
