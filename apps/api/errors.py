"""One error shape for every API error: {"error": {"code", "message", "details"}}.

DRF's default handler answers only for its own exceptions (and Django's Http404 and
PermissionDenied); anything else would fall through to Django's HTML 500 page. Here every
exception becomes the same JSON shape, so a client needs exactly one error parser.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

log = logging.getLogger(__name__)


class Conflict(exceptions.APIException):
    """The operation does not fit the resource's current state (e.g. launching a running campaign)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "the resource is not in a state that allows this operation"
    default_code = "conflict"


class RequestTooLarge(exceptions.APIException):
    """A body over DATA_UPLOAD_MAX_MEMORY_SIZE: Django refuses to read it, the client hears why."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"


def error_body(code: str, message: str, details: Any = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details}}


def _message(detail: Any) -> str:
    """A one-line summary of a DRF error detail (a string, list or field -> errors mapping)."""
    if isinstance(detail, dict):
        parts = []
        for field, errors in detail.items():
            first = errors[0] if isinstance(errors, list) and errors else errors
            parts.append(f"{field}: {_message(first)}")
        return "; ".join(parts) or "invalid input"
    if isinstance(detail, list):
        return _message(detail[0]) if detail else "invalid input"
    return str(detail)


def api_exception_handler(exc: Exception, context: dict) -> Response:
    """Render any exception raised by an API view in the shared error shape."""
    if isinstance(exc, RequestDataTooBig):
        # Django raises it when the view first reads the body; unhandled it would be a 500.
        exc = RequestTooLarge(f"request body larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "not found")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    if not isinstance(exc, exceptions.APIException):
        view = context.get("view")
        log.exception("unexpected error in API view %s", type(view).__name__ if view else "?")
        set_rollback()
        body = error_body("server_error", "unexpected server error; it has been logged")
        return Response(body, status=status.HTTP_500_INTERNAL_SERVER_ERROR)

    headers = {}
    # Only some APIException subclasses carry these (NotAuthenticated's challenge, Throttled's wait).
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)
    if wait:
        headers["Retry-After"] = str(int(wait))
    set_rollback()
    if isinstance(exc, exceptions.ValidationError):
        details = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        body = error_body("invalid", _message(exc.detail), details)
    else:
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        body = error_body(code, _message(exc.detail))
    return Response(body, status=exc.status_code, headers=headers)


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Stable machine-readable code, e.g. not_found, invalid, permission_denied."
    )
    message = serializers.CharField(help_text="One line for humans.")
    details = serializers.JSONField(
        allow_null=True, help_text="For code 'invalid': field name -> list of messages; otherwise null."
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()
