"""Login is required for every URL except the health check and the login pages."""

from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.urls import URLPattern, URLResolver, get_resolver, path, reverse

from thinkingbox_web import urls as site_urls

# Named URLs anonymous users may open, and why.
PUBLIC_URL_NAMES = {
    "core:healthz",  # load balancers probe it without a session
    "core:favicon",  # browsers ask for it on every page, the login page included
    "login",  # the way in
    "admin:login",  # Django admin's own login form
}


def iter_patterns(patterns, namespace=None, prefix=""):
    """Yield (qualified name, route prefix + pattern string, callback) for every URL pattern."""
    for entry in patterns:
        if isinstance(entry, URLResolver):
            child_ns = entry.namespace or namespace
            if namespace and entry.namespace:
                child_ns = f"{namespace}:{entry.namespace}"
            yield from iter_patterns(entry.url_patterns, child_ns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            name = f"{namespace}:{entry.name}" if namespace and entry.name else entry.name
            yield name, prefix + str(entry.pattern), entry.callback


def all_patterns():
    return list(iter_patterns(get_resolver().url_patterns))


def is_api(name: str | None) -> bool:
    """REST API views authenticate themselves (token or session) and answer 401, never a redirect."""
    return bool(name) and name.startswith("api:")


def test_every_url_pattern_requires_login_unless_listed_public():
    opted_out = {
        name or route
        for name, route, callback in all_patterns()
        if getattr(callback, "login_required", True) is False and not is_api(name)
    }
    assert opted_out == PUBLIC_URL_NAMES


def plain_view(request):
    return HttpResponse("nothing here asks for a login")


# The site's URLs plus one view with no access decorator at all (used through @pytest.mark.urls).
urlpatterns = [path("plain-view-without-decorators/", plain_view), *site_urls.urlpatterns]


@pytest.mark.django_db
@pytest.mark.urls("tests.core.test_login_required")
def test_a_view_without_any_access_decorator_still_requires_login(client, bob):
    anonymous = client.get("/plain-view-without-decorators/")
    client.force_login(bob)
    signed_in = client.get("/plain-view-without-decorators/")

    assert (anonymous.status_code, anonymous["Location"]) == (
        302,
        f"{reverse('login')}?next=/plain-view-without-decorators/",
    )
    assert (signed_in.status_code, signed_in.content) == (200, b"nothing here asks for a login")


def concrete_paths():
    """Paths of every pattern without parameters (those can be requested as they are)."""
    for name, route, _callback in all_patterns():
        if name and "<" not in route and "(" not in route and "^" not in route:
            yield name, reverse(name)


@pytest.mark.django_db
@pytest.mark.parametrize("name,path", sorted(set(concrete_paths())))
def test_anonymous_request_redirects_to_login_except_public(client, name, path):
    response = client.get(path)
    if name == "core:favicon":
        assert response.status_code == 301
    elif name in PUBLIC_URL_NAMES:
        assert response.status_code in (200, 503)
    elif is_api(name):
        assert response.status_code == 401
    else:
        assert response.status_code == 302
        # Admin site views send people to the admin's login form, everything else to ours.
        login_path = response["Location"].split("?next=")[0]
        assert login_path in {reverse("login"), reverse("admin:login")}
        assert response["Location"].endswith("?next=" + path)


@pytest.mark.django_db
def test_anonymous_post_to_role_protected_view_redirects_to_login(client):
    response = client.post(reverse("core:ping_workers"))
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={reverse('core:ping_workers')}"


@pytest.mark.django_db
def test_anonymous_admin_pages_redirect_to_login(client):
    response = client.get("/admin/core/team/")
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next=/admin/core/team/"


@pytest.mark.parametrize(
    ("next_url", "expected"),
    [("https://elsewhere.example/", "/"), ("//elsewhere.example/", "/"), ("/triage/", "/triage/")],
)
def test_login_next_stays_on_this_site(client, bob, next_url, expected):
    response = client.post(
        f"/accounts/login/?next={next_url}", {"username": "bob", "password": "bob-pw", "next": next_url}
    )

    assert (response.status_code, response["Location"]) == (302, expected)
