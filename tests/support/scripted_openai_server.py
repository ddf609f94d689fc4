"""A real OpenAI-compatible HTTP server on 127.0.0.1 that plays scripted responses.

POST .../chat/completions (non-streaming; /v1/chat/completions and the Azure
/openai/deployments/<name>/chat/completions path) answers from a *script*: a
list of steps chosen by *route* (the request's model, or the Azure deployment)
and optionally by conversation (the ``X-Script-Conversation`` header). A step is
a dict with any of:

  text: str                     assistant text
  tool_calls: [{name, arguments, id?}]   one or more (parallel) calls; ``arguments``
                                as a dict (encoded) or a raw string (sent as is, e.g. bad JSON)
  status: int                   answer with this HTTP error instead
  retry_after: str              Retry-After header (seconds or HTTP date) on an error
  delay_ms: int                 wait before answering
  drop: true                    close the socket without any response
  usage: {prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens}
  finish_reason: str            override ("stop" / "tool_calls" by default)
  repeat: int                   the step stands for this many consecutive requests

Every request body is recorded (standalone: only counted); the peak number of simultaneous requests is tracked.
With ``GenericMode`` any unscripted model is answered: a call to the first
read-only-looking tool for K turns, then a final text, after a fixed delay.

Standalone (for throughput benchmarks):
  python3 tests/support/scripted_openai_server.py --port 8765 --delay-ms 300 --tool-calls 8
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CONVERSATION_HEADER = "X-Script-Conversation"
READ_PREFIXES = ("get_", "list_", "find_", "search_", "lookup_", "read_", "check_", "view_", "describe_")
_BILLED_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")
_AZURE_PATH = re.compile(r"/openai/deployments/([^/]+)/chat/completions$")


@dataclass
class GenericMode:
    """Answer any conversation: ``tool_calls`` read-only tool turns, then ``final_text``."""

    tool_calls: int = 3
    delay_ms: int = 0
    final_text: str = "All done: I looked it up and everything is in order."
    # Tool-less requests (user simulator, judge) get this: a "yes" that also ends the dialogue.
    no_tools_text: str = "Yes, thank you, that is all I needed. ###STOP###"
    arguments: dict[str, Any] | None = None  # fixed arguments instead of ones derived from the schema


@dataclass
class RecordedRequest:
    route: str
    conversation: str | None
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class _Script:
    steps: list[dict[str, Any]]
    position: int = 0


class ScriptedOpenAIServer:
    """Start with ``start()`` (or as a context manager); ``base_url`` ends in /v1."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        generic: GenericMode | None = None,
        record: bool = True,
    ) -> None:
        self.generic = generic
        # What successful answers say about the model behind them (drift tests flip these):
        # the `system_fingerprint` field, the reported `model` per route, and extra response headers.
        self.system_fingerprint: str | None = None
        self.reported_models: dict[str, str] = {}
        self.response_headers: dict[str, str] = {}
        self.record = record  # False (standalone benchmarks): count requests, keep no bodies
        self.requests: list[RecordedRequest] = []
        # The endpoint's own bill: (route, usage) of every completion it answered, in order.
        self.billed: list[tuple[str, dict[str, int]]] = []
        self.served = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self._scripts: dict[tuple[str, str | None], _Script] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd = _Server((host, port), _make_handler(self))
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------------------
    def script(self, route: str, steps: list[dict[str, Any]], *, conversation: str | None = None) -> None:
        """Set the steps played, in order, to requests for ``route`` (and conversation)."""
        expanded: list[dict[str, Any]] = []
        for step in steps:
            count = int(step.get("repeat", 1))
            expanded.extend([{k: v for k, v in step.items() if k != "repeat"}] * count)
        with self._lock:
            self._scripts[(route, conversation)] = _Script(expanded)

    def unscript(self, route: str, *, conversation: str | None = None) -> None:
        """Forget the script for ``route``: its requests fall back to the generic mode again."""
        with self._lock:
            self._scripts.pop((route, conversation), None)

    def remaining(self, route: str, *, conversation: str | None = None) -> int:
        """Steps not yet played for ``route``."""
        with self._lock:
            script = self._scripts.get((route, conversation))
            return 0 if script is None else len(script.steps) - script.position

    def requests_for(self, route: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.route == route]

    def billed_for(self, route: str) -> dict[str, int]:
        """The usage the endpoint reported for ``route``, summed over every answered completion."""
        with self._lock:
            usages = [usage for billed_route, usage in self.billed if billed_route == route]
        return {key: sum(usage[key] for usage in usages) for key in _BILLED_KEYS}

    def reset_peak(self) -> None:
        with self._lock:
            self.peak_in_flight = self.in_flight

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedOpenAIServer:
        # A short poll interval keeps stop() (which waits for the next poll) fast in fixtures.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="scripted-openai",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answering -------------------------------------------------------------------------
    def _next_step(self, route: str, conversation: str | None, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            script = self._scripts.get((route, conversation)) or self._scripts.get((route, None))
            if script is not None:
                if script.position >= len(script.steps):
                    return {
                        "status": 400,
                        "error": f"scripted server: script for model {route!r} is exhausted",
                    }
                step = script.steps[script.position]
                script.position += 1
                return step
        if self.generic is not None:
            return generic_step(body, self.generic)
        return {"status": 404, "error": f"scripted server: no script for model {route!r}"}

    def _enter(self, record: RecordedRequest | None) -> None:
        with self._lock:
            self.served += 1
            if record is not None:
                self.requests.append(record)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def completion_body(self, route: str, step: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """The JSON of a successful chat completion for ``step``."""
        text = step.get("text")
        calls = []
        for position, call in enumerate(step.get("tool_calls") or []):
            arguments = call.get("arguments", {})
            calls.append(
                {
                    "id": call.get("id") or f"call_{next(self._ids)}_{position}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                    },
                }
            )
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = calls
        usage = step.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens", max(1, len(json.dumps(body.get("messages", []))) // 4))
        completion_tokens = usage.get("completion_tokens", max(1, len((text or "") + json.dumps(calls)) // 4))
        billed = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cached_tokens": usage.get("cached_tokens", 0),
            "reasoning_tokens": usage.get("reasoning_tokens", 0),
        }
        with self._lock:
            self.billed.append((route, billed))
        answer = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.reported_models.get(route, route),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": step.get("finish_reason") or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
                "completion_tokens_details": {"reasoning_tokens": usage.get("reasoning_tokens", 0)},
            },
        }
        if self.system_fingerprint is not None:
            answer["system_fingerprint"] = self.system_fingerprint
        return answer


def generic_step(body: dict[str, Any], mode: GenericMode) -> dict[str, Any]:
    """The generic answer to any conversation (see GenericMode)."""
    step: dict[str, Any] = {"delay_ms": mode.delay_ms}
    tools = body.get("tools") or []
    if not tools:
        step["text"] = mode.no_tools_text
        return step
    messages = body.get("messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    tool_turns = sum(
        1 for m in messages[last_user + 1 :] if m.get("role") == "assistant" and m.get("tool_calls")
    )
    if tool_turns >= mode.tool_calls:
        step["text"] = mode.final_text
        return step
    functions = [t.get("function", {}) for t in tools]
    chosen = next((f for f in functions if str(f.get("name", "")).startswith(READ_PREFIXES)), functions[0])
    arguments = (
        mode.arguments if mode.arguments is not None else arguments_for_schema(chosen.get("parameters") or {})
    )
    step["tool_calls"] = [{"name": chosen["name"], "arguments": arguments}]
    return step


def arguments_for_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Plausible values for a JSON schema's required properties (first enum value, else by type)."""
    samples = {"string": "1", "integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for name in schema.get("required") or []:
        prop = properties.get(name) or {}
        if prop.get("enum"):
            arguments[name] = prop["enum"][0]
        else:
            kind = prop.get("type", "string")
            arguments[name] = samples.get(kind if isinstance(kind, str) else kind[0], "1")
    return arguments


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog (5) drops connections under 64 concurrent clients
    allow_reuse_address = True


def _make_handler(server: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        rbufsize = 1 << 16  # a whole conversation in one or two reads, not 8 KB at a time

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            if not path.endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": f"scripted server: unknown path {path}"}})
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "scripted server: request body is not JSON"}})
                return
            azure = _AZURE_PATH.search(path)
            route = azure.group(1) if azure else str(body.get("model", ""))
            conversation = self.headers.get(CONVERSATION_HEADER)
            if server.record:
                headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
                server._enter(RecordedRequest(route, conversation, path, headers, body))
            else:
                server._enter(None)
            try:
                self._answer(route, conversation, body)
            finally:
                server._leave()

        def _answer(self, route: str, conversation: str | None, body: dict[str, Any]) -> None:
            step = server._next_step(route, conversation, body)
            if step.get("delay_ms"):
                time.sleep(step["delay_ms"] / 1000.0)
            if step.get("drop"):
                self.close_connection = True  # no bytes at all: the client sees a dropped connection
                return
            if step.get("status"):
                extra = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else {}
                message = step.get("error") or f"scripted error {step['status']}"
                self._send_json(int(step["status"]), {"error": {"message": message}}, extra)
                return
            self._send_json(200, server.completion_body(route, step, body), dict(server.response_headers))

        def _send_json(
            self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            # Status line, headers and body in one write: one send (and one wake-up of the client)
            # per answer. The server's CPU shares the cores with the workers it benchmarks.
            data = json.dumps(payload).encode()
            reason = self.responses.get(status, ("",))[0]
            lines = [
                f"{self.protocol_version} {status} {reason}",
                "Content-Type: application/json",
                f"Content-Length: {len(data)}",
            ]
            lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)

    return Handler


def scripted_server_fixture() -> Iterator[ScriptedOpenAIServer]:
    """Body of the ``scripted_server`` pytest fixture: a started server, stopped afterwards."""
    server = ScriptedOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay-ms", type=int, default=300)
    parser.add_argument(
        "--tool-calls", type=int, default=3, help="read-only tool turns before the final text"
    )
    parser.add_argument("--final-text", default=GenericMode.final_text)
    parser.add_argument("--arguments", default=None, help="JSON object used as every tool call's arguments")
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="stop by itself after this long")
    args = parser.parse_args(argv)
    if not args.host.startswith("127.") and args.host not in ("localhost", "::1"):
        parser.error("--host must be a loopback address")
    mode = GenericMode(
        tool_calls=args.tool_calls,
        delay_ms=args.delay_ms,
        final_text=args.final_text,
        arguments=json.loads(args.arguments) if args.arguments else None,
    )
    server = ScriptedOpenAIServer(host=args.host, port=args.port, generic=mode, record=False).start()
    print(f"listening on http://{args.host}:{server.port}/v1", flush=True)
    try:
        time.sleep(args.max_seconds)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        print(f"served {server.served} requests, peak in flight {server.peak_in_flight}", flush=True)


if __name__ == "__main__":
    main()
