"""The OpenAPI schema and its browsable docs (signed-in users and tokens only), and a JSON 404 for unknown /api/ paths."""

from __future__ import annotations

import threading

from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated

from apps.api.base import ApiView
from apps.api.errors import api_exception_handler

# drf-spectacular's schema generation is not thread-safe: generators share view instances and
# global stats, and two concurrent requests in a threaded server can fail with "Schema generation
# REQUIRES a view instance" (tfranzel/drf-spectacular#1123). One generation at a time per process.
_SCHEMA_LOCK = threading.Lock()


@extend_schema(exclude=True)
class SchemaView(SpectacularAPIView):
    """Login is required everywhere but /healthz, the schema included: clients fetch it with their token."""

    authentication_classes = ApiView.authentication_classes  # token first: anonymous gets 401, not 403
    permission_classes = [IsAuthenticated]

    def get_exception_handler(self):
        return api_exception_handler

    def _get_schema_response(self, request):
        with _SCHEMA_LOCK:
            return super()._get_schema_response(request)


class DocsView(SpectacularSwaggerView):
    authentication_classes = ApiView.authentication_classes  # token first: anonymous gets 401, not 403
    permission_classes = [IsAuthenticated]


@extend_schema(exclude=True)
class UnknownEndpointView(ApiView):
    """Any path under /api/ that names no endpoint: 401 without credentials, else a JSON 404."""

    def _not_found(self, request, *args, **kwargs):
        raise NotFound(f"no API endpoint at {request.path}")

    get = post = put = patch = delete = _not_found
