"""The endpoint gate of a worker with a Redis broker: one cap per endpoint across all workers.

Each request to a model endpoint takes a lease in a Redis semaphore before it goes
(``tb_engine.llm.gate.EndpointGate``). Admission is one Lua script: drop expired leases, refuse
while a 429 pause is in force, admit while fewer leases than the cap are held. A lease expires on
its own (LEASE_S, longer than any request's timeout), so a killed worker never keeps a slot for
long. A refused request waits in short polls with jitter, registered meanwhile as waiting (its
entry expires too). A 429's Retry-After pauses that endpoint, and only that one, for every worker.
Leaving records the call in per-minute stats the campaign page reads (apps.core.endpoint_load).

The gate never raises: when Redis fails, the request goes (the in-process limiter still holds).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import defaultdict, deque

import redis

from apps.core.endpoint_load import STATS_TTL_S, endpoint_load_redis, endpoint_redis_key, latency_bucket
from tb_engine.llm.gate import Outcome, set_endpoint_gate

log = logging.getLogger(__name__)

LEASE_S = 180.0  # above the client's default request timeout (120 s)
POLL_S = 0.05  # mean wait between two tries for a slot
WAITER_TTL_S = 10.0  # a waiting entry not refreshed for this long is dropped
DEFAULT_429_PAUSE_S = 1.0  # a 429 without Retry-After
MAX_PAUSE_S = 300.0

# KEYS: holders, waiting, pause. ARGV: token, cap (0: none), lease ms, waiter ttl ms.
# Returns 0 when admitted, -1 when the cap is full, else the pause left (ms).
_ADMIT = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local paused = redis.call('PTTL', KEYS[3])
local verdict = -1
if paused > 0 then
  verdict = paused
else
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  local cap = tonumber(ARGV[2])
  if cap == 0 or redis.call('ZCARD', KEYS[1]) < cap then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    redis.call('ZREM', KEYS[2], ARGV[1])
    return 0
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return verdict
"""

# KEYS: holders, pause, stats key prefix (the minute is appended by Redis's clock).
# ARGV: token ('' for none), outcome, latency ms, latency bucket, pause ms, stats ttl s.
_LEAVE = """
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[1], ARGV[1]) end
local stats = KEYS[3] .. math.floor(tonumber(redis.call('TIME')[1]) / 60)
redis.call('HINCRBY', stats, 'calls', 1)
if ARGV[2] == 'ok' then
  redis.call('HINCRBY', stats, 'ok', 1)
  redis.call('HINCRBY', stats, 'latency_ms', ARGV[3])
  redis.call('HINCRBY', stats, 'h' .. ARGV[4], 1)
elseif ARGV[2] == 'rate_limited' then
  redis.call('HINCRBY', stats, 'rate_limited', 1)
else
  redis.call('HINCRBY', stats, 'errors', 1)
end
redis.call('EXPIRE', stats, ARGV[6])
local pause = tonumber(ARGV[5])
if pause > 0 and redis.call('PTTL', KEYS[2]) < pause then
  redis.call('SET', KEYS[2], '1', 'PX', pause)
end
return 0
"""


class RedisEndpointGate:
    """An EndpointGate whose caps, pauses and stats live in Redis, shared by every worker."""

    def __init__(self, client: redis.Redis, *, lease_s: float = LEASE_S, poll_s: float = POLL_S) -> None:
        self._admit = client.register_script(_ADMIT)
        self._leave = client.register_script(_LEAVE)
        self._lease_ms = int(lease_s * 1000)
        self._poll_s = poll_s
        # Leases this process holds, per endpoint. Any one of them may be given back: they differ
        # only in expiry, and giving back the oldest keeps the newest covering the calls still out.
        self._leases: defaultdict[str, deque[str]] = defaultdict(deque)
        self._lock = threading.Lock()

    def enter(self, endpoint: str, limit: int | None) -> None:
        token = uuid.uuid4().hex
        keys = [endpoint_redis_key(endpoint, part) for part in ("holders", "waiting", "pause")]
        try:
            while True:
                verdict = int(
                    self._admit(keys=keys, args=[token, limit or 0, self._lease_ms, _WAITER_TTL_MS])
                )
                if verdict == 0:
                    break
                time.sleep(self._wait_s(pause_ms=verdict))
        except redis.RedisError:
            log.warning("endpoint gate: Redis failed, %s goes ungated", endpoint, exc_info=True)
            token = ""
        with self._lock:
            self._leases[endpoint].append(token)

    def _wait_s(self, *, pause_ms: int) -> float:
        """How long to sleep before the next try: a short poll with jitter, or the rest of a pause
        plus jitter (so the waiters do not all come back at once), never so long that the waiting
        entry expires."""
        wait = self._poll_s * random.uniform(0.5, 1.5)
        if pause_ms > 0:
            wait += pause_ms / 1000
        return min(wait, WAITER_TTL_S / 2)

    def leave(self, endpoint: str, *, seconds: float, outcome: Outcome, retry_after_s: float | None) -> None:
        with self._lock:
            leases = self._leases[endpoint]
            token = leases.popleft() if leases else ""
        pause_s = 0.0
        if outcome == "rate_limited":
            pause_s = min(DEFAULT_429_PAUSE_S if retry_after_s is None else retry_after_s, MAX_PAUSE_S)
        latency_ms = int(seconds * 1000)
        keys = [
            endpoint_redis_key(endpoint, "holders"),
            endpoint_redis_key(endpoint, "pause"),
            endpoint_redis_key(endpoint, "stats:"),
        ]
        args: list[str | int] = [
            token,
            outcome,
            latency_ms,
            latency_bucket(latency_ms),
            int(pause_s * 1000),
            STATS_TTL_S,
        ]
        try:
            self._leave(keys=keys, args=args)
        except redis.RedisError:
            log.warning("endpoint gate: Redis failed recording a call to %s", endpoint, exc_info=True)


_WAITER_TTL_MS = int(WAITER_TTL_S * 1000)


def install_endpoint_gate() -> RedisEndpointGate | None:
    """Install the Redis gate in this process when the broker is Redis, else none (in-process limiter only)."""
    client = endpoint_load_redis()
    gate = None if client is None else RedisEndpointGate(client)
    set_endpoint_gate(gate)
    return gate
