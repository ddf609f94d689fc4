"""What the endpoints said about the model that answered a campaign's attempts (Attempt.provider)."""

from __future__ import annotations

from typing import Any

from apps.attempts.models import Attempt


def provider_identity_lists(*, campaign_id: int) -> list[list[dict[str, Any]]]:
    """Per attempt of the campaign its endpoint identities ({model, system_fingerprint, headers,
    calls}; [] for simulated agents), without the rest of the row (one query)."""
    return list(Attempt.objects.filter(campaign_id=campaign_id).values_list("provider", flat=True))
