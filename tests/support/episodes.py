"""Open-episode counts of a live environment server, for tests that check every close frees its episode."""

from __future__ import annotations

import time

import httpx

from tb_envserver import EnvServer


def open_episodes(server: EnvServer) -> int:
    return httpx.get(f"{server.url}/health").json()["episodes"]


def wait_for_open(server: EnvServer, expected: int, *, timeout: float = 5.0) -> int:
    """The open-episode count once it settles (a socket close is handled just after the client returns)."""
    deadline = time.monotonic() + timeout
    while open_episodes(server) != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return open_episodes(server)
