"""Sign-in with the rate limiter in front of Django's password check (apps.core.rate_limits).

The backend covers every form that authenticates (the login page, the admin's); the login form
only adds a message that says why and for how long, where the backend can only refuse.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import PermissionDenied

from apps.core import rate_limits


class RateLimitedModelBackend(ModelBackend):
    """ModelBackend that counts failures and refuses, unchecked, while the account or address is locked."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None or username is None:
            return super().authenticate(request, username=username, password=password, **kwargs)
        address = rate_limits.client_address(request)
        if rate_limits.login_wait_s(username=username, address=address):
            raise PermissionDenied("too many failed sign-ins")  # authenticate() stops at this backend
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            rate_limits.login_failed(username=username, address=address)
        else:
            rate_limits.login_succeeded(username=username)
        return user


class RateLimitedAuthenticationForm(AuthenticationForm):
    """The login form; a locked account or address hears how long to wait instead of 'did not match'."""

    throttled_message = ""

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        if username and self.request is not None:
            wait = rate_limits.login_wait_s(
                username=username, address=rate_limits.client_address(self.request)
            )
            if wait:
                self.throttled_message = (
                    "Too many failed sign-ins for this account or address; try again in "
                    f"{rate_limits.wait_in_words(wait)}."
                )
                raise forms.ValidationError(self.throttled_message, code="throttled")
        return super().clean()
