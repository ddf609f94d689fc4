"""The attempt page of MCP attempts in real headless Chromium, as every role: the server's stderr of
an infra error (escaped) and the knowledge-base search notice; outsiders are turned away."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from apps.agents.services import agent_config_for
from apps.attempts.models import Attempt
from apps.campaigns.services import campaign_create, campaign_start
from apps.suites.models import Suite
from tests.campaigns.conftest import drain
from tests.support.browser import signed_in_page
from tests.thinkingbox.conftest import MCP_COMMAND, ROOT, tb_test_source, write_dataset

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCRIPT = "<script>window.__pwned = 1</script>"


@pytest.fixture(autouse=True)
def _close_mcp_pools():
    yield
    from tb_engine.thinkingbox.mcp_pool import close_pools

    close_pools()


@pytest.fixture
def mcp_attempts(tmp_path, alice, team_a, settings) -> dict[str, Attempt]:
    """One passing attempt (search unavailable) and one infra error whose stderr carries markup."""
    settings.ATTEMPT_MAX_RETRIES = 0
    dataset = write_dataset(
        tmp_path / "dataset",
        [
            tb_test_source("test_fine"),
            tb_test_source("test_escaped", patch="{'" + SCRIPT + "': [{id: W-1}]}"),
        ],
    )
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(dataset),
        "--suite-name",
        "browser-shop",
        "--mcp-command",
        MCP_COMMAND,
        "--mcp-cwd",
        str(ROOT),
        "--mcp-pool-size",
        "1",
        stdout=StringIO(),
    )
    campaign = campaign_create(
        name="browser shop",
        team=team_a,
        owner=alice,
        agent=agent_config_for("golden"),
        suite=Suite.objects.get(name="browser-shop"),
        n_attempts=1,
    )
    campaign_start(campaign=campaign)
    drain(campaign)
    attempts = Attempt.objects.filter(campaign=campaign)
    return {a.task.task_id.split(":")[1]: a for a in attempts}


def test_attempt_page_of_mcp_attempts_renders_for_every_role(
    live_server, client, bob, trish, alice, admin_user_persona, mcp_attempts
):
    infra, fine = mcp_attempts["test_escaped"], mcp_attempts["test_fine"]
    seen = []
    for user in (bob, trish, alice, admin_user_persona):  # viewer, triager, operator, admin
        with signed_in_page(live_server, client, user) as page:
            page.goto(f"{live_server.url}/attempts/{infra.pk}/")
            stderr = page.locator("#server-stderr").inner_text()
            untouched = page.evaluate("window.__pwned === undefined")
            page.goto(f"{live_server.url}/attempts/{fine.pk}/")
            notice = page.locator("#kb-search").inner_text()
            seen.append((stderr.splitlines(), untouched, notice.split(":")[0], list(page.errors)))
    assert (infra.status, fine.status, fine.verdict) == ("infra_error", "done", "pass")
    expected_stderr = ["tb_test_shop: init with 1 patched table(s)", f"tb_test_shop: unknown table {SCRIPT}"]
    assert seen == [(expected_stderr, True, "Knowledge-base search unavailable", [])] * 4


def test_attempt_page_of_mcp_attempts_turns_outsiders_away(live_server, client, charlie, erin, mcp_attempts):
    statuses = []
    for user in (charlie, erin):
        with signed_in_page(live_server, client, user) as page:
            response = page.goto(f"{live_server.url}/attempts/{mcp_attempts['test_escaped'].pk}/")
            statuses.append((response.status, page.locator("#server-stderr").count()))
    assert statuses == [(403, 0), (404, 0)]
