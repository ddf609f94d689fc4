"""Root URLs: admin, login/logout, core pages, then every app under apps/ that has a urls.py."""

from __future__ import annotations

import importlib.util

from django.conf import settings
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("apps.core.urls")),
]

# Each app owns its URL prefixes inside its own urls.py (with app_name), so adding an app needs
# no edit here and parallel work on different apps does not collide in this file.
for app_module in settings.LOCAL_APPS:
    if app_module != "apps.core" and importlib.util.find_spec(f"{app_module}.urls") is not None:
        urlpatterns.append(path("", include(f"{app_module}.urls")))
