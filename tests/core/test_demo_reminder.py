"""Issue 30 item 12: once the demo server answers, its URL and login are printed again below the banners."""

from __future__ import annotations

import socket
import time
from io import StringIO

from apps.core.management.commands.demo import Command


def test_url_and_login_are_printed_again_once_the_server_listens():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        out = StringIO()
        command = Command(stdout=out)
        command._remind_when_listening(
            f"127.0.0.1:{port}", [f"URL: http://127.0.0.1:{port}/", "Login: demo / demo"]
        )
        deadline = time.monotonic() + 10
        while "Login: demo / demo" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.1)
    text = out.getvalue()
    assert "The demo is serving. Open it and sign in:" in text
    assert f"  URL: http://127.0.0.1:{port}/\n  Login: demo / demo" in text
