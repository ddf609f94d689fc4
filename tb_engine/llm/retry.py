"""Backoff arithmetic: capped exponential backoff with full jitter, and Retry-After parsing."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

from tb_engine.llm.config import RetryPolicy


def backoff_delay(policy: RetryPolicy, retry_index: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``retry_index`` (0-based): uniform in [0, min(cap, base*2^i)]."""
    ceiling = min(policy.max_delay_s, policy.base_delay_s * (2 ** min(retry_index, 30)))
    return (rng or random).uniform(0.0, ceiling)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass  # fall through to Retry-After
    value = lowered.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
