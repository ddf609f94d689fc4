"""Set or clear the search service (Typesense URL + key variable) of an imported suite.

The ThinkingBox servers index a scenario's policy ``sources`` into Typesense at
``__reserved__init``. With no search service an attempt's init leaves the sources out and the
attempt records "knowledge-base search unavailable" (tb_engine.thinkingbox.mcp_backend); with
one, the worker hands the URL and the key (read from the named variable) to the server process.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from apps.suites.models import Suite
from apps.thinkingbox.models import SearchService

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# The 202606 ThinkingBox servers build their Typesense client with this address whatever they are told.
SERVERS_FIXED_ADDRESS = ("127.0.0.1", 8108)


class SearchServiceError(ValueError):
    """A search-service setting that cannot be used (the message names the option)."""


def allowed_key_envs() -> list[str]:
    """The key variables an admin allowed (TB_SEARCH_KEY_ENVS)."""
    return list(settings.THINKINGBOX_SEARCH_KEY_ENVS)


def check_search_setting(*, url: str, api_key_env: str) -> list[str]:
    """Raise SearchServiceError for an unusable setting; return warnings for a usable but doubtful one."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SearchServiceError(f"--url {url!r}: expected http(s)://HOST[:PORT]")
    if api_key_env and not ENV_NAME.match(api_key_env):
        raise SearchServiceError(
            f"--key-env {api_key_env!r}: must be an environment variable name, not a key"
        )
    if api_key_env and api_key_env not in allowed_key_envs():
        raise SearchServiceError(
            f"--key-env {api_key_env}: not allowed; an admin lists the allowed variables in "
            f"TB_SEARCH_KEY_ENVS (now: {', '.join(allowed_key_envs()) or 'none'})"
        )
    port = parts.port or (443 if parts.scheme == "https" else 8108)
    warnings = []
    if (parts.hostname, port) != SERVERS_FIXED_ADDRESS and parts.hostname != "localhost":
        warnings.append(
            f"the tb_business_ops_servers_202606 servers connect to Typesense at "
            f"{SERVERS_FIXED_ADDRESS[0]}:{SERVERS_FIXED_ADDRESS[1]} whatever the URL; "
            "servers that read TYPESENSE_URL/TYPESENSE_HOST use this one"
        )
    return warnings


def search_service_set(*, suite: Suite, url: str, api_key_env: str = "") -> tuple[SearchService, list[str]]:
    """Store the suite's search service; returns it and any warnings.

    Side effects: one SearchService row (created or updated). Raises SearchServiceError.
    """
    warnings = check_search_setting(url=url, api_key_env=api_key_env)
    service, _ = SearchService.objects.update_or_create(
        suite=suite, defaults={"url": url, "api_key_env": api_key_env}
    )
    return service, warnings


def search_service_clear(*, suite: Suite) -> bool:
    """Remove the suite's own search service (the site default, if any, applies). Side effects: deletes a row."""
    deleted, _ = SearchService.objects.filter(suite=suite).delete()
    return bool(deleted)


def describe(search: dict[str, Any] | None) -> str:
    if not search:
        return "none (knowledge-base search unavailable; scenario sources are left out of init)"
    key = search.get("api_key_env") or "no key variable"
    return f"{search['url']} (key from ${key})"
