"""The API's limits: unknown tokens per address (a token guesser), requests per account and per address.

Rates come from settings when a request is checked (TB_API_RATE_PER_ACCOUNT, TB_API_RATE_PER_ADDRESS),
counted in the same ``rate-limits`` cache as failed sign-ins (apps.core.rate_limits).
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import caches
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.throttling import SimpleRateThrottle

from apps.core import rate_limits


class CountedTokenAuthentication(TokenAuthentication):
    """Token auth that counts unknown tokens per address and, past the limit, refuses every token (429)."""

    def authenticate(self, request):
        words = get_authorization_header(request).split()
        if not words or words[0].lower() != self.keyword.lower().encode():
            return None  # no token offered: nothing to count
        address = rate_limits.client_address(request)
        wait = rate_limits.token_wait_s(address=address)
        if wait:
            raise Throttled(
                wait=wait, detail=f"too many unknown API tokens from this address; retry in {wait} s"
            )
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            rate_limits.token_failed(address=address)
            raise


class _SettingsRateThrottle(SimpleRateThrottle):
    setting = ""

    @property
    def cache(self):  # type: ignore[override]  # DRF reads it as an attribute
        return caches[rate_limits.CACHE_ALIAS]

    def get_rate(self) -> str:
        return getattr(settings, self.setting)


class AccountRateThrottle(_SettingsRateThrottle):
    """Requests per signed-in account (token or session): API_RATE_PER_ACCOUNT."""

    scope = "account"
    setting = "API_RATE_PER_ACCOUNT"

    def get_cache_key(self, request, view):
        if not request.user or not request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class AddressRateThrottle(_SettingsRateThrottle):
    """Requests without a signed-in account, per address: API_RATE_PER_ADDRESS."""

    scope = "address"
    setting = "API_RATE_PER_ADDRESS"

    def get_cache_key(self, request, view):
        if request.user and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": rate_limits.client_address(request)}
