"""An OpenAI-compatible chat endpoint on 127.0.0.1 that replays golden trajectories after a fixed delay.

The stand-in for a real model in bench/llm_campaign.py: every answer waits ``--latency`` seconds
(a real model is slower), so what the bench measures is how many attempts a worker keeps in
flight while each waits, not how fast a model thinks.

* A request with tools is the agent: its first user message is a task's query, the number of
  assistant messages so far is the turn. Turn k < len(golden) answers with golden call k as a
  tool call; the turn after the last call answers with a closing text (no end marker, so the
  user simulator decides that the dialogue ends).
* A request without tools is the LLM user simulator (or a judge): it answers a closing line
  with the stop token.

The trajectories come from ``--trajectories FILE``: JSON ``{query: [[tool, arguments], …] | [[[tool,
arguments], …], …]}`` (a query shared by several tasks lists each trajectory; the one whose tools
the request offers is replayed). GET /stats answers the request counts, the peak of requests in
flight and the requests that found no trajectory.

Standard library only, asyncio streams with keep-alive: one process answers hundreds of
simultaneous connections without a thread each.

Run:  python3 bench/golden_endpoint.py --port 8765 --latency 1.0 --trajectories golden.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

CLOSING_TEXT = "All done: I have taken care of your request."
USER_CLOSING = "Thank you, that is everything I needed. ###STOP###"


class Replayer:
    def __init__(self, trajectories: dict[str, Any], latency_s: float) -> None:
        self.trajectories = trajectories
        self.latency_s = latency_s
        self.in_flight = 0
        self.peak = 0
        self.counts = {"agent": 0, "user": 0, "unknown_query": 0}
        self.started = time.monotonic()

    def stats(self) -> dict[str, Any]:
        return {**self.counts, "in_flight": self.in_flight, "peak": self.peak}

    def reset_peak(self) -> None:
        self.peak = self.in_flight

    def _calls_for(self, query: str, offered: set[str]) -> list[list[Any]] | None:
        found = self.trajectories.get(query)
        if not found:
            return None
        candidates = found if found and isinstance(found[0][0], list) else [found]
        for calls in candidates:
            if all(tool in offered for tool, _ in calls):
                return calls
        return candidates[0]

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        tools = body.get("tools") or []
        if not tools:
            self.counts["user"] += 1
            return _completion(body, {"role": "assistant", "content": USER_CLOSING}, "stop")
        self.counts["agent"] += 1
        query = next((m.get("content") for m in messages if m.get("role") == "user"), "")
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        offered = {tool.get("function", {}).get("name") for tool in tools}
        calls = self._calls_for(str(query), offered)
        if calls is None:
            self.counts["unknown_query"] += 1
            calls = []
        if turn < len(calls):
            tool, arguments = calls[turn]
            call = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(arguments)},
            }
            return _completion(
                body, {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
            )
        return _completion(body, {"role": "assistant", "content": CLOSING_TEXT}, "stop")


def _completion(body: dict[str, Any], message: dict[str, Any], finish: str) -> dict[str, Any]:
    prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
    return {
        "id": "chatcmpl-golden",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "golden-replay"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": 20,
            "total_tokens": prompt_chars // 4 + 20,
        },
    }


async def _serve_connection(
    replayer: Replayer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            request_line = await reader.readline()
            if not request_line:
                return
            method, path, _ = request_line.decode("latin-1").split(" ", 2)
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            raw = await reader.readexactly(length) if length else b""
            if method == "GET" and path.startswith("/stats"):
                if "reset" in path:
                    replayer.reset_peak()
                payload = replayer.stats()
            elif method == "POST" and path.endswith("/chat/completions"):
                replayer.in_flight += 1
                replayer.peak = max(replayer.peak, replayer.in_flight)
                try:
                    await asyncio.sleep(replayer.latency_s)
                    payload = replayer.answer(json.loads(raw))
                finally:
                    replayer.in_flight -= 1
            else:
                payload = {"error": {"message": f"no route {method} {path}"}}
            data = json.dumps(payload).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        return
    finally:
        writer.close()


async def serve(port: int, replayer: Replayer) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve_connection(replayer, r, w), "127.0.0.1", port, backlog=4096
    )
    print(f"golden endpoint on 127.0.0.1:{port}, latency {replayer.latency_s} s", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds each chat call waits")
    parser.add_argument("--trajectories", required=True, help="JSON {query: golden calls}")
    args = parser.parse_args()
    with open(args.trajectories) as handle:
        trajectories = json.load(handle)
    asyncio.run(serve(args.port, Replayer(trajectories, args.latency)))


if __name__ == "__main__":
    main()
