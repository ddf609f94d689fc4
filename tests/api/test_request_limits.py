"""Bodies the server will not read: answered in the error shape, never a 500."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db


def test_oversized_api_body_is_413_in_error_shape(api_for, alice):
    body = json.dumps({"name": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})

    response = api_for(alice).post("/api/campaigns/", data=body, content_type="application/json")

    assert response.status_code == 413
    assert error_of(response) == {
        "code": "request_too_large",
        "message": f"request body larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes",
        "details": None,
    }
