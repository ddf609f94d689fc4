"""Reads for ThinkingBox suites worth a name: the search service an attempt of a suite runs with."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from apps.thinkingbox.models import SearchService


def search_service_for(*, suite_id: int) -> dict[str, Any] | None:
    """The suite's search service, else the site default (TB_SEARCH_URL), else None.

    ``{"url", "api_key_env", "scope"}``; ``error`` is added when the key variable is no longer in
    TB_SEARCH_KEY_ENVS (the engine then fails the attempt as an infrastructure error naming it).
    """
    row = SearchService.objects.filter(suite_id=suite_id).values("url", "api_key_env").first()
    if row is not None:
        search: dict[str, Any] = {**row, "scope": "suite"}
    elif settings.THINKINGBOX_SEARCH_URL:
        search = {
            "url": settings.THINKINGBOX_SEARCH_URL,
            "api_key_env": settings.THINKINGBOX_SEARCH_KEY_ENV,
            "scope": "site default",
        }
    else:
        return None
    key_env = search["api_key_env"]
    if key_env and key_env not in settings.THINKINGBOX_SEARCH_KEY_ENVS:
        search["error"] = f"the search service's key variable {key_env} is not allowed by TB_SEARCH_KEY_ENVS"
    return search
