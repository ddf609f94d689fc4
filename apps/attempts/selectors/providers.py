"""What the endpoints said about the model that answered a campaign's attempts (Attempt.provider)."""

from __future__ import annotations

from typing import Any

from apps.attempts.models import Attempt


def provider_identity_lists(*, campaign_id: int) -> list[list[dict[str, Any]]]:
    """Per attempt of the campaign its endpoint identities ({model, system_fingerprint, headers,
    calls}; [] for simulated agents), without the rest of the row (one query)."""
    return list(Attempt.objects.filter(campaign_id=campaign_id).values_list("provider", flat=True))


def provider_models(*, campaign_ids: list[int]) -> dict[int, tuple[str, ...]]:
    """Per campaign the distinct models its endpoints said answered ("model · fingerprint"), sorted;
    campaigns whose agents report none (golden, simulated) are absent (one query)."""
    seen: dict[int, set[str]] = {}
    rows = Attempt.objects.filter(campaign_id__in=campaign_ids).values_list("campaign_id", "provider")
    for campaign_id, identities in rows.iterator(chunk_size=2000):
        for identity in identities or []:
            words = [str(identity.get("model") or "?")]
            if identity.get("system_fingerprint"):
                words.append(str(identity["system_fingerprint"]))
            seen.setdefault(campaign_id, set()).add(" · ".join(words))
    return {campaign_id: tuple(sorted(models)) for campaign_id, models in seen.items()}
