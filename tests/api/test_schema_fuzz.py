"""Schema-driven fuzz of the live API (schemathesis CLI) and a no-credentials sweep of every operation.

Runs against pytest-django's live_server on 127.0.0.1 (real HTTP, real threads), seeded with a
finished campaign so detail endpoints have rows to find. Attempts launched by the fuzzer stay
queued: dispatch is switched off, because no worker belongs to this test.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import requests

pytestmark = pytest.mark.django_db(transaction=True)

# The API grew by a dozen operations (noise floor, planner, gates, drift watches); 150 s no longer
# covered them all on the shared 2-core box.
FUZZ_TIMEOUT_SECONDS = 300
SCHEMA_ACCEPT = {"Accept": "application/vnd.oai.openapi+json"}


@pytest.fixture
def seeded_api(live_server, run_campaign, alice, bob):
    """Live server with one finished campaign (team A); returns (base url, alice's token)."""
    from rest_framework.authtoken.models import Token

    run_campaign("sim:careless", tasks=2, n=2, name="Fuzz target")
    token, _ = Token.objects.get_or_create(user=alice)
    return live_server.url, token.key


def _schemathesis_command() -> list[str]:
    """The CLI of the interpreter running the tests (a .venv need not be on PATH)."""
    return [sys.executable, "-m", "schemathesis.cli"]


def test_fuzz_finds_no_server_error(seeded_api, tmp_path):
    base, token = seeded_api
    command = [
        *_schemathesis_command(),
        "run",
        f"{base}/api/schema/",
        "--header",
        f"Authorization: Token {token}",
        "--checks",
        "not_a_server_error",
        # The coverage phase alone takes ~2 minutes on the shared box; fuzzing with a fixed seed finds
        # the same classes of bug (it caught integer-overflow ids and an empty-slice crash here).
        "--phases",
        "examples,fuzzing",
        "--max-examples",
        "30",
        "--seed",
        "1",
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--no-color",
        "--request-timeout",
        "20",
    ]

    result = subprocess.run(
        command, capture_output=True, text=True, timeout=FUZZ_TIMEOUT_SECONDS, cwd=tmp_path
    )

    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    summary = re.search(r"(\d+) generated, (\d+) passed", output)
    assert summary is not None, output[-3000:]
    generated, passed = int(summary.group(1)), int(summary.group(2))
    assert generated == passed
    assert generated >= 200  # every operation was really exercised, not skipped


def _operations(base: str, token: str) -> list[tuple[str, str]]:
    headers = {**SCHEMA_ACCEPT, "Authorization": f"Token {token}"}
    schema = requests.get(f"{base}/api/schema/", headers=headers, timeout=30).json()
    return [
        (method.upper(), path.replace("{id}", "1").replace("{name}", "leaderboard"))
        for path, ops in schema["paths"].items()
        for method in ops
    ]


def test_every_operation_refuses_requests_without_credentials(seeded_api):
    base, token = seeded_api
    operations = _operations(base, token)

    answers = {
        (method, path): requests.request(method, base + path, json={}, timeout=30).status_code
        for method, path in operations
    }

    assert len(operations) >= 30
    assert {key: code for key, code in answers.items() if code != 401} == {}


def test_schema_needs_credentials_on_the_live_server(seeded_api):
    base, token = seeded_api

    anonymous = requests.get(f"{base}/api/schema/", headers=SCHEMA_ACCEPT, timeout=30)
    with_token = requests.get(
        f"{base}/api/schema/", headers={**SCHEMA_ACCEPT, "Authorization": f"Token {token}"}, timeout=30
    )

    assert anonymous.status_code == 401
    assert (with_token.status_code, with_token.json()["info"]["title"]) == (200, "ThinkingBox Web API")
