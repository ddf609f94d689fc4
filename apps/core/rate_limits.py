"""Failed sign-ins and unknown API tokens, counted per account and per address in a fixed window.

A password or token guesser is slowed, not merely logged: once an account or an address has
failed too often within the window (settings.RATE_LIMIT_WINDOW_SECONDS), every further try is
refused *before* the credential is checked — the right password or a valid token included — until
the window that started with the first failure ends. A refused try teaches the guesser nothing and
does not extend the window. A successful sign-in clears its account's count (not its address's).

Counts live in the ``rate-limits`` cache: Redis when TB_RATE_LIMIT_CACHE_URL is set (shared by
every web process, as docker/compose.yaml runs it), else this process's memory. Account names and
addresses enter cache keys only as digests.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest

CACHE_ALIAS = "rate-limits"


def client_address(request: HttpRequest) -> str:
    """The address a request came from: TB_CLIENT_ADDRESS_HEADER (set by a trusted proxy) or the peer."""
    header = settings.CLIENT_ADDRESS_HEADER
    forwarded = request.META.get(header, "") if header else ""
    # A proxy that appends (X-Forwarded-For) puts the address it saw last.
    address = forwarded.split(",")[-1].strip() if forwarded else ""
    return address or str(request.META.get("REMOTE_ADDR") or "unknown")


def _key(kind: str, value: str) -> str:
    return f"rate-limits:{kind}:{hashlib.sha256(value.encode()).hexdigest()[:32]}"


def _wait_s(key: str, limit: int) -> int:
    """Seconds until `key`'s window ends when its count has reached `limit`, else 0."""
    cache = caches[CACHE_ALIAS]
    found = cache.get_many([key, key + ":until"])
    if int(found.get(key) or 0) < limit:
        return 0
    until = float(found.get(key + ":until") or 0)
    return max(1, math.ceil(until - time.time()))


def _count_failure(key: str) -> None:
    cache = caches[CACHE_ALIAS]
    window = settings.RATE_LIMIT_WINDOW_SECONDS
    # The window starts with the first failure; add() leaves a running window alone.
    if cache.add(key + ":until", time.time() + window, timeout=window):
        cache.set(key, 0, timeout=window)
    try:
        cache.incr(key)
    except ValueError:  # the count expired between the two calls: a new window
        cache.set(key, 1, timeout=window)


def login_wait_s(*, username: str, address: str) -> int:
    """Seconds a sign-in as `username` from `address` must wait (0: it may try now)."""
    return max(
        _wait_s(_key("login-account", username.lower()), settings.LOGIN_FAILURES_PER_ACCOUNT),
        _wait_s(_key("login-address", address), settings.LOGIN_FAILURES_PER_ADDRESS),
    )


def login_failed(*, username: str, address: str) -> None:
    """Count a failed sign-in against the account (whether or not it exists) and the address."""
    _count_failure(_key("login-account", username.lower()))
    _count_failure(_key("login-address", address))


def login_succeeded(*, username: str) -> None:
    """A right password outside any lock: the account's earlier failures are forgiven."""
    key = _key("login-account", username.lower())
    caches[CACHE_ALIAS].delete_many([key, key + ":until"])


def token_wait_s(*, address: str) -> int:
    """Seconds a request with an API token from `address` must wait (0: it may try now)."""
    return _wait_s(_key("token-address", address), settings.TOKEN_FAILURES_PER_ADDRESS)


def token_failed(*, address: str) -> None:
    """Count an unknown or inactive API token presented from `address`."""
    _count_failure(_key("token-address", address))


def wait_in_words(seconds: int) -> str:
    """'1 second', '40 seconds', '15 minutes': how a page says how long to wait."""
    if seconds < 120:
        return f"{seconds} second" + ("" if seconds == 1 else "s")
    return f"{math.ceil(seconds / 60)} minutes"
