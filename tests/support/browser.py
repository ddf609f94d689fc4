"""Headless Chromium for UI tests: Debian's /usr/bin/chromium driven by Playwright (never downloaded)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connections
from django.test.testcases import LiveServerThread

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def signed_in_page(live_server, client, user, *, viewport: tuple[int, int] = (1440, 900)) -> Iterator:
    """A Chromium page carrying `user`'s session cookie; `page.errors` collects console and page errors."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed")
    # Playwright's sync API runs an event loop; Django must allow ORM calls from this thread.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    client.force_login(user)
    session = client.cookies["sessionid"].value
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        host = live_server.url.split("//")[1].split(":")[0]
        context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
        page = context.new_page()
        page.errors = []
        page.on(
            "console", lambda message: page.errors.append(message.text) if message.type == "error" else None
        )
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        try:
            yield page
        finally:
            browser.close()


@contextmanager
def whitenoise_server():
    """A live server whose static files come through WhiteNoise, as in the demo and production.

    pytest-django's live_server answers /static/ with Django's own static view (no gzip, no cache
    headers), which would measure something no user gets; this one passes every request to the
    project's middleware (WhiteNoise first). Settings must already say WHITENOISE_USE_FINDERS (no collectstatic here).
    """
    shared = {
        alias: connection
        for alias, connection in ((c.alias, c) for c in connections.all())
        if connection.vendor == "sqlite" and connection.is_in_memory_db()
    }
    for connection in shared.values():
        connection.inc_thread_sharing()
    # The thread wraps Django's handler in a media-files handler that, with MEDIA_URL unset, would
    # answer /static/ from the working directory; unwrap it so the project's middleware answers.
    thread = LiveServerThread(
        "localhost", lambda media_handler: media_handler.application, connections_override=shared, port=0
    )
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    try:
        yield SimpleNamespace(url=f"http://localhost:{thread.port}")
    finally:
        thread.terminate()
        for connection in shared.values():
            connection.dec_thread_sharing()
