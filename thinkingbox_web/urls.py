"""Root URLs: admin, login/logout, core pages, then every app under apps/ that has a urls.py."""

from __future__ import annotations

import importlib.util

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from apps.core.auth import RateLimitedAuthenticationForm

urlpatterns = [
    path("admin/", admin.site.urls),
    # Only the auth views we support: password reset needs outgoing mail, which we do not configure.
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(authentication_form=RateLimitedAuthenticationForm),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("", include("apps.core.urls")),
]
handler403 = "apps.core.views.permission_denied"
handler404 = "apps.core.views.page_not_found"

# Each app owns its URL prefixes inside its own urls.py (with app_name), so adding an app needs
# no edit here and parallel work on different apps does not collide in this file.
for app_module in settings.LOCAL_APPS:
    if app_module != "apps.core" and importlib.util.find_spec(f"{app_module}.urls") is not None:
        urlpatterns.append(path("", include(f"{app_module}.urls")))
