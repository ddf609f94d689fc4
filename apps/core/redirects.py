"""Where a form may send the user next: only paths on this site (no open redirect)."""

from __future__ import annotations

from django.utils.http import url_has_allowed_host_and_scheme


def safe_next(request, default: str) -> str:
    """The request's ``next`` (POST, then GET) when it stays on this host and scheme, else `default`.

    ``next=https://elsewhere/`` or ``//elsewhere`` would send a signed-in user off-site: every
    redirect to a client-chosen place goes through Django's url_has_allowed_host_and_scheme.
    """
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default
