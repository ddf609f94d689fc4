"""What every API view shares: authentication, role permission, pagination, schema helpers.

Roles are the UI's (apps.core.roles): a view names the role each HTTP method needs
(`roles = {"GET": Role.VIEWER, "POST": Role.OPERATOR}`); reads default to viewer. Team
visibility is applied by the views' querysets (apps.campaigns.selectors.campaigns_visible_to),
so an object of another team is a 404, never a 403: outsiders learn nothing about it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.views import APIView

from apps.api.errors import ErrorSerializer, api_exception_handler
from apps.api.throttles import AccountRateThrottle, AddressRateThrottle, CountedTokenAuthentication
from apps.core.access import user_has_role
from apps.core.roles import Role


class HasRequiredRole(BasePermission):
    """The user holds the role the view requires for this HTTP method (viewer by default)."""

    def has_permission(self, request, view) -> bool:
        required = view.required_role(request.method)
        if user_has_role(request.user, required):
            return True
        self.message = f"this operation needs the {required.value} role"
        return False


class ApiPagination(PageNumberPagination):
    """?page=N&page_size=M (default 50, at most 200); every list answers {count, next, previous, results}."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class ApiView(APIView):
    # Token first: its WWW-Authenticate header makes a missing credential a 401, not a 403.
    authentication_classes = [CountedTokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated, HasRequiredRole]
    throttle_classes = [AccountRateThrottle, AddressRateThrottle]
    roles: dict[str, Role] = {}

    def check_permissions(self, request):
        # Throttles before permissions (DRF checks them after): an anonymous caller would otherwise
        # get an endless stream of 401s and never meet the per-address limit.
        super().check_throttles(request)
        super().check_permissions(request)

    def check_throttles(self, request):
        pass  # already checked, before the permissions

    def required_role(self, method: str) -> Role:
        return self.roles.get(method, Role.VIEWER)

    def get_exception_handler(self):
        return api_exception_handler

    def paginate(
        self, items: Any, serializer_class: type[serializers.Serializer], *, transform=None, **context
    ):
        """One page of `items` (a queryset or list) serialized, in the shared list envelope.

        `transform` turns the page's items into what the serializer reads, so expensive
        figures are computed for one page only.
        """
        paginator = ApiPagination()
        page: list[Any] | None = paginator.paginate_queryset(items, self.request, view=self)
        if transform is not None:
            page = transform(page)
        data = serializer_class(page, many=True, context={"request": self.request, **context}).data
        return paginator.get_paginated_response(data)

    def validated_query(self, serializer_class: type[serializers.Serializer]) -> dict:
        """Query parameters checked by `serializer_class` (a 400 naming the parameter when bad)."""
        serializer = serializer_class(data=self.request.query_params)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def validated_body(self, serializer_class: type[serializers.Serializer], **context) -> dict:
        serializer = serializer_class(data=self.request.data, context={"request": self.request, **context})
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


@cache
def paginated(serializer_class: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The list envelope around `serializer_class`, as its own schema component."""
    name = serializer_class.__name__.removesuffix("Serializer").removesuffix("Output")
    attrs = {
        "count": serializers.IntegerField(help_text="Items over all pages."),
        "next": serializers.URLField(allow_null=True, help_text="URL of the next page, null on the last."),
        "previous": serializers.URLField(
            allow_null=True, help_text="URL of the previous page, null on the first."
        ),
        "results": serializer_class(many=True),
    }
    return type(f"Paginated{name}List", (serializers.Serializer,), attrs)


# Largest primary key the databases store (signed 64-bit); bigger ids would overflow inside `__in` lookups.
MAX_ID = 2**63 - 1


def id_field(**kwargs) -> serializers.IntegerField:
    """An integer id query/body field bounded to what the database can compare against."""
    return serializers.IntegerField(min_value=1, max_value=MAX_ID, **kwargs)


ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid input; details names each field."),
    401: OpenApiResponse(ErrorSerializer, description="No or bad credentials."),
    403: OpenApiResponse(ErrorSerializer, description="Signed in without the role this operation needs."),
    404: OpenApiResponse(ErrorSerializer, description="No such object among those your teams may see."),
    409: OpenApiResponse(ErrorSerializer, description="Not allowed in the object's current state."),
}


def api_schema(
    *,
    summary: str,
    tags: Iterable[str],
    responses: dict,
    request: Any = None,
    parameters: list | None = None,
    errors: Iterable[int] = (400, 401, 403, 404),
    description: str = "",
    operation_id: str | None = None,
):
    """extend_schema with the shared error responses (so every documented error has the error shape)."""
    all_responses = {**{code: ERRORS[code] for code in errors}, **responses}
    return extend_schema(
        summary=summary,
        description=description,
        tags=list(tags),
        request=request,
        responses=all_responses,
        parameters=parameters or [],
        operation_id=operation_id,
    )
