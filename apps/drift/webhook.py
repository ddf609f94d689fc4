"""The drift webhook: one JSON POST per alert to TB_DRIFT_WEBHOOK_URL, signed when a secret is set.

The body carries the watch, the run, the alert reasons and the comparisons. With
TB_DRIFT_WEBHOOK_SECRET set, ``X-ThinkingBox-Signature: sha256=<hex>`` is the HMAC-SHA256 of the
exact body bytes, so a receiver can check the sender.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

USER_AGENT = "ThinkingBox-Web drift watch"


@dataclass(frozen=True)
class Delivery:
    ok: bool
    status: str  # "HTTP 200", or why it failed


def signature(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post(url: str, payload: dict[str, Any], *, secret: str = "", timeout: float = 5.0) -> Delivery:
    """POST the payload as JSON; a 2xx answer is a delivery, anything else (or no answer) is not."""
    body = json.dumps(payload, sort_keys=True, default=str).encode()
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    if secret:
        headers["X-ThinkingBox-Signature"] = signature(body, secret)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(
            request, timeout=timeout
        ) as response:  # the URL comes from the settings, never from a user
            return Delivery(ok=200 <= response.status < 300, status=f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        return Delivery(ok=False, status=f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        return Delivery(ok=False, status=f"no answer: {getattr(exc, 'reason', exc)}")
