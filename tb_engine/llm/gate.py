"""A process-wide hook through which every chat request passes on its way to an endpoint.

The in-process ``EndpointLimiter`` caps one process; a provider's limit is shared by every
worker process on every machine. An ``EndpointGate`` installed at worker start (the Django
side installs one backed by Redis) admits a request only while the endpoint has a free slot
under its cap across all workers and no 429 pause is in force for it, and hears how each
request ended so a Retry-After pauses that endpoint for everyone. Without a gate (the
default, and the embedded single-process setup) only the in-process limiter applies.

Endpoints are named by ``endpoint_key``: the normalised base URL, never a key or credentials.
"""

from __future__ import annotations

from typing import Literal, Protocol
from urllib.parse import urlsplit

Outcome = Literal["ok", "rate_limited", "error"]


class EndpointGate(Protocol):
    """Admission to, and the outcome of, each HTTP request to an endpoint (must never raise)."""

    def enter(self, endpoint: str, limit: int | None) -> None:
        """Block until a request to ``endpoint`` may go: a slot under ``limit`` (None: no cap)
        shared by all processes, and no 429 pause in force for it."""
        ...

    def leave(self, endpoint: str, *, seconds: float, outcome: Outcome, retry_after_s: float | None) -> None:
        """Give the slot back; ``retry_after_s`` (a 429's Retry-After) pauses the endpoint for everyone."""
        ...


_gate: EndpointGate | None = None


def set_endpoint_gate(gate: EndpointGate | None) -> None:
    """Install the process-wide gate (None: only the in-process limiter)."""
    global _gate
    _gate = gate


def endpoint_gate() -> EndpointGate | None:
    """The installed gate, if any."""
    return _gate


def endpoint_key(base_url: str) -> str:
    """The name of an endpoint: scheme, host, port and path of its base URL, lower-cased where
    case does not matter, without credentials, query or trailing slash."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme.lower()}://{host}{parts.path.rstrip('/')}"
