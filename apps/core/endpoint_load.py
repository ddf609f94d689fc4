"""Each model endpoint's live load, as the workers' endpoint gate keeps it in Redis.

The gate (apps.worker.endpoint_gate) writes, the campaign page and API read (``endpoint_loads``).
Keys, for an endpoint named by ``tb_engine.llm.gate.endpoint_key`` (the normalised base URL):

  tb:endpoint:<endpoint>:holders          ZSET lease token -> lease expiry (ms): requests in flight
  tb:endpoint:<endpoint>:waiting          ZSET waiter token -> expiry (ms): requests waiting to go
  tb:endpoint:<endpoint>:pause            a string whose TTL is a 429's Retry-After still in force
  tb:endpoint:<endpoint>:stats:<minute>   HASH calls, ok, errors, rate_limited, latency_ms, h0…h10

Every time is Redis's own clock (TIME), so workers on several hosts agree without synchronised
clocks, and every key expires, so a killed worker leaves nothing behind for long. There is no
Redis when the broker is the embedded one (filesystem/SQLite): then there are no live figures.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

import redis
from django.conf import settings

KEY_PREFIX = "tb:endpoint:"
# Upper bounds (ms) of the latency histogram's buckets; one more bucket holds everything slower.
LATENCY_BOUNDS_MS = (100, 250, 500, 1_000, 2_000, 4_000, 8_000, 15_000, 30_000, 60_000)
STATS_TTL_S = 15 * 60  # per-minute stats are kept this long
FIGURES_WINDOW_MINUTES = 5  # the page's latency and rates: the last five minutes, this one included


def endpoint_redis_key(endpoint: str, part: str) -> str:
    """The Redis key of one part (holders, waiting, pause, stats:) of an endpoint's load."""
    return f"{KEY_PREFIX}{endpoint}:{part}"


def latency_bucket(latency_ms: float) -> int:
    """The histogram bucket of a latency: the first bound at or above it (len(bounds) if none)."""
    return bisect_left(LATENCY_BOUNDS_MS, latency_ms)


_clients: dict[str, redis.Redis] = {}
_clients_lock = threading.Lock()


def endpoint_load_redis() -> redis.Redis | None:
    """A client of the broker's Redis, shared by the process; None when the broker is not Redis."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return None
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            # Short timeouts: a page poll or a waiting request must not hang on a Redis that is gone.
            client = _clients[url] = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
    return client


@dataclass(frozen=True)
class EndpointLoad:
    """One endpoint now (in flight, waiting, pause) and over the last few minutes (calls, latency)."""

    endpoint: str
    in_flight: int  # requests holding a slot, from every worker
    waiting: int  # requests waiting for a slot or for a 429 pause to end
    paused_s: float  # what is left of a 429 pause (0: none)
    calls: int
    errors: int
    rate_limited: int
    latency_p50_ms: float | None  # of successful calls
    latency_p95_ms: float | None
    minutes: int  # the window of calls, errors, rate_limited and the percentiles

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.calls if self.calls else None

    @property
    def rate_limited_rate(self) -> float | None:
        return self.rate_limited / self.calls if self.calls else None

    def to_dict(self) -> dict[str, object]:
        return {
            "endpoint": self.endpoint,
            "in_flight": self.in_flight,
            "waiting": self.waiting,
            "paused_s": self.paused_s,
            "calls": self.calls,
            "errors": self.errors,
            "rate_limited": self.rate_limited,
            "error_rate": self.error_rate,
            "rate_limited_rate": self.rate_limited_rate,
            "latency_p50_ms": self.latency_p50_ms,
            "latency_p95_ms": self.latency_p95_ms,
            "minutes": self.minutes,
        }


def histogram_percentile(counts: Sequence[int], quantile: float) -> float | None:
    """The ``quantile`` of latencies counted in LATENCY_BOUNDS_MS buckets, linear inside a bucket
    (the open last bucket answers its lower bound); None when nothing was counted."""
    total = sum(counts)
    if total == 0:
        return None
    target = quantile * total
    below = 0
    for index, count in enumerate(counts):
        if count and below + count >= target:
            lower = LATENCY_BOUNDS_MS[index - 1] if index > 0 else 0
            if index >= len(LATENCY_BOUNDS_MS):
                return float(lower)
            upper = LATENCY_BOUNDS_MS[index]
            return lower + (upper - lower) * (target - below) / count
        below += count
    return float(LATENCY_BOUNDS_MS[-1])


def endpoint_loads(
    endpoints: Sequence[str], *, client: redis.Redis | None = None, minutes: int = FIGURES_WINDOW_MINUTES
) -> dict[str, EndpointLoad] | None:
    """Each endpoint's load (two round trips); None when there is no Redis (embedded broker).

    Raises redis.RedisError when Redis is configured but does not answer.
    """
    client = client or endpoint_load_redis()
    if client is None:
        return None
    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    minute = seconds // 60
    window = range(minute - minutes + 1, minute + 1)
    pipe = client.pipeline(transaction=False)
    for endpoint in endpoints:
        pipe.zcount(endpoint_redis_key(endpoint, "holders"), now_ms, "+inf")
        pipe.zcount(endpoint_redis_key(endpoint, "waiting"), now_ms, "+inf")
        pipe.pttl(endpoint_redis_key(endpoint, "pause"))
        for each in window:
            pipe.hgetall(endpoint_redis_key(endpoint, f"stats:{each}"))
    answers = iter(pipe.execute())
    loads = {}
    for endpoint in endpoints:
        in_flight, waiting, pause_ms = next(answers), next(answers), next(answers)
        totals: dict[str, int] = {}
        for _ in window:
            for field, value in next(answers).items():
                name = field.decode()
                totals[name] = totals.get(name, 0) + int(value)
        histogram = [totals.get(f"h{index}", 0) for index in range(len(LATENCY_BOUNDS_MS) + 1)]
        loads[endpoint] = EndpointLoad(
            endpoint=endpoint,
            in_flight=int(in_flight),
            waiting=int(waiting),
            paused_s=max(0, int(pause_ms)) / 1000,
            calls=totals.get("calls", 0),
            errors=totals.get("errors", 0),
            rate_limited=totals.get("rate_limited", 0),
            latency_p50_ms=histogram_percentile(histogram, 0.5),
            latency_p95_ms=histogram_percentile(histogram, 0.95),
            minutes=minutes,
        )
    return loads
