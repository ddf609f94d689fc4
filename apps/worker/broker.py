"""What the worker asks the broker itself: when a Redis broker last started."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from celery import current_app
from django.utils import timezone


class RedisChannel(Protocol):
    """The Redis transport's channel; kombu's base channel type has no client."""

    @property
    def client(self) -> Any: ...


def broker_started_at() -> datetime | None:
    """The latest moment the Redis broker can have started, by this host's clock (None: not Redis).

    Redis reports its uptime in whole seconds, so ``now - uptime`` is at or after the real start:
    every message sent before the start is older than it (a few sent just after are too, and are
    re-sent needlessly, which claims make harmless). Durations, not clocks, cross hosts here.
    """
    with current_app.connection_for_read() as connection:
        if connection.transport.driver_type != "redis":
            return None
        channel = cast(RedisChannel, connection.default_channel)  # the redis driver's, checked above
        uptime = int(channel.client.info("server")["uptime_in_seconds"])
    return timezone.now() - timedelta(seconds=uptime)
