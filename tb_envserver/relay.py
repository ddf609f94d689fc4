"""Which worker process owns an episode, and relaying a request to it.

An episode lives in the process that reset it (its sandbox and suspended attempt are that
process's memory) and its id starts with the owner's index, two hex digits. A request that lands
on another worker is sent on to the owner's private port and its answer passed back unchanged.
"""

from __future__ import annotations

import socket
from typing import Any

import httpx2

MAX_WORKERS = 256  # the owner index is two hex digits of the episode id
RELAY_TIMEOUT_S = 60.0


def worker_prefix(index: int) -> str:
    """The episode-id prefix of the worker with this index."""
    return f"{index:02x}"


def episode_owner(episode_id: Any, workers: int) -> int | None:
    """The index of the worker that owns ``episode_id``, or None when the id names no worker."""
    if not isinstance(episode_id, str) or len(episode_id) < 2:
        return None
    try:
        owner = int(episode_id[:2], 16)
    except ValueError:
        return None
    return owner if owner < workers else None


class PeerUnavailable(Exception):
    """A relay to another worker failed (it stopped, or its connection broke)."""


class Peers:
    """This worker's index, every worker's private address, and relaying to them.

    One HTTP client per peer keeps its connections alive between relays (one per relay in flight),
    so a slow answer from one worker never holds up another relay.
    """

    def __init__(self, index: int, addresses: list[tuple[str, int]], private_socket: socket.socket):
        self.index = index
        self.addresses = addresses
        self.private_socket = private_socket
        self.private_port: int = private_socket.getsockname()[1]
        self._clients: dict[int, httpx2.AsyncClient] = {}

    @property
    def count(self) -> int:
        return len(self.addresses)

    def others(self) -> list[int]:
        return [i for i in range(self.count) if i != self.index]

    def owner_elsewhere(self, episode_id: Any) -> int | None:
        """The owning worker when it is another process, else None (handle here)."""
        owner = episode_owner(episode_id, self.count)
        return None if owner is None or owner == self.index else owner

    async def relay(self, owner: int, method: str, target: str, body: bytes) -> tuple[int, bytes]:
        """Send one request to worker ``owner``; its status and JSON body as it answered."""
        client = self._clients.get(owner)
        if client is None:
            host, port = self.addresses[owner]
            # trust_env=False: a proxy from the environment must never see loopback traffic between workers.
            client = httpx2.AsyncClient(
                base_url=f"http://{host}:{port}", timeout=RELAY_TIMEOUT_S, trust_env=False
            )
            self._clients[owner] = client
        try:
            response = await client.request(method, target, content=body)
        except httpx2.TransportError as exc:
            raise PeerUnavailable(f"{type(exc).__name__}: {exc}") from exc
        return response.status_code, response.content

    async def close(self) -> None:
        """Close the relay connections (at the end of serving)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()
