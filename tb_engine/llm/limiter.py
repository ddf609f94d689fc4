"""Process-wide caps on in-flight requests per endpoint base URL.

Every client that talks to the same base URL shares one ``EndpointLimiter``, so
N worker threads running attempts against one vLLM box never exceed its cap.
There is no global lock around requests: the condition variable is held only
while a slot is counted in or out. When two configs ask for different caps on
the same base URL the smaller one wins (the safer reading of a provider limit).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class EndpointLimiter:
    """A counting limiter whose cap can be lowered while in use (None = unlimited)."""

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._in_flight = 0
        self._peak = 0
        self._condition = threading.Condition()

    @property
    def limit(self) -> int | None:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def peak(self) -> int:
        """Most requests ever in flight at once through this limiter."""
        return self._peak

    def tighten(self, limit: int | None) -> None:
        """Lower the cap to ``limit`` if it is smaller (None leaves it unchanged)."""
        if limit is None:
            return
        with self._condition:
            if self._limit is None or limit < self._limit:
                self._limit = limit

    def _has_room(self) -> bool:
        return self._limit is None or self._in_flight < self._limit

    def acquire(self) -> None:
        with self._condition:
            self._condition.wait_for(self._has_room)
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)

    def try_acquire(self) -> bool:
        with self._condition:
            if not self._has_room():
                return False
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            return True

    def release(self) -> None:
        with self._condition:
            self._in_flight -= 1
            self._condition.notify()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one in-flight slot for the duration of a request."""
        self.acquire()
        try:
            yield
        finally:
            self.release()


_registry: dict[str, EndpointLimiter] = {}
_registry_lock = threading.Lock()


def limiter_for(base_url: str, limit: int | None) -> EndpointLimiter:
    """The shared limiter of ``base_url``, tightened to ``limit``."""
    key = base_url.rstrip("/")
    with _registry_lock:
        limiter = _registry.get(key)
        if limiter is None:
            limiter = _registry[key] = EndpointLimiter(limit)
    limiter.tighten(limit)
    return limiter
