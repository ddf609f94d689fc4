"""The MCP runtime seen from campaigns: the search-service setting, and bad input at run time
(a server that will not start, crashes mid-attempt or answers init with an error) ending as a
retried infra_error whose server stderr the attempt page shows, escaped, to every role."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.agents.services import agent_config_for
from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.services import campaign_create, campaign_start
from apps.suites.models import Suite
from apps.thinkingbox.models import SearchService
from tests.campaigns.conftest import drain
from tests.thinkingbox.conftest import HEADER, MCP_COMMAND, ROOT, tb_test_source, write_dataset

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def _close_mcp_pools():
    yield
    from tb_engine.thinkingbox.mcp_pool import close_pools

    close_pools()


def _import(dataset, name, *, command=MCP_COMMAND):
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(dataset),
        "--suite-name",
        name,
        "--mcp-command",
        command,
        "--mcp-cwd",
        str(ROOT),
        "--mcp-pool-size",
        "1",
        stdout=StringIO(),
    )
    return Suite.objects.get(name=name)


def _run(suite, alice, team_a, *, n=1):
    campaign = campaign_create(
        name=f"{suite.name} golden",
        team=team_a,
        owner=alice,
        agent=agent_config_for("golden"),
        suite=suite,
        n_attempts=n,
    )
    campaign_start(campaign=campaign)
    drain(campaign)
    return Attempt.objects.filter(campaign=campaign).order_by("task__task_id", "index")


@pytest.fixture
def shop_suite(shop_dataset) -> Suite:
    return _import(shop_dataset, "shop")


def _search(*args) -> str:
    out = StringIO()
    call_command("thinkingbox_search", *args, stdout=out, stderr=out)
    return out.getvalue()


# --- search service ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_without_search_service_init_leaves_sources_out_and_the_attempt_says_so(shop_suite, alice, team_a):
    attempt = _run(shop_suite, alice, team_a).get(task__task_id="shop.py:test_open_and_close")
    assert (attempt.status, attempt.verdict) == ("done", "pass")
    assert attempt.result["extra"]["backend"]["knowledge_base_search"] == {
        "available": False,
        "reason": "no search service (Typesense) is configured for this suite",
        "sources_left_out": 1,
    }


@pytest.mark.django_db
def test_search_service_reaches_the_server_and_the_key_is_never_stored(
    shop_suite, alice, team_a, monkeypatch, settings
):
    settings.THINKINGBOX_SEARCH_KEY_ENVS = ["TB_SHOP_SEARCH_KEY"]
    monkeypatch.setenv("TB_SHOP_SEARCH_KEY", "sekrit-key-value")
    printed = _search("--suite", "shop", "--url", "http://127.0.0.1:8108", "--key-env", "TB_SHOP_SEARCH_KEY")
    attempt = _run(shop_suite, alice, team_a).get(task__task_id="shop.py:test_open_and_close")
    stored = json.dumps(attempt.result)
    assert (
        printed == "suite shop: search service http://127.0.0.1:8108 (key from $TB_SHOP_SEARCH_KEY) (suite)\n"
    )
    assert (attempt.status, attempt.verdict) == ("done", "pass")
    assert attempt.result["extra"]["backend"]["knowledge_base_search"] == {
        "available": True,
        "url": "http://127.0.0.1:8108",
        "api_key_env": "TB_SHOP_SEARCH_KEY",
        "scope": "suite",
    }
    assert "sekrit-key-value" not in stored
    assert list(SearchService.objects.values_list("url", "api_key_env")) == [
        ("http://127.0.0.1:8108", "TB_SHOP_SEARCH_KEY")
    ]


@pytest.mark.django_db
def test_search_service_passes_url_and_key_the_way_the_servers_read_them(monkeypatch, settings, shop_suite):
    from apps.worker.execution import runnable_domain
    from tb_engine.thinkingbox.mcp_pool import backend_for_domain

    settings.THINKINGBOX_SEARCH_KEY_ENVS = ["TB_SHOP_SEARCH_KEY"]
    monkeypatch.setenv("TB_SHOP_SEARCH_KEY", "sekrit-key-value")
    _search("--suite", "shop", "--url", "http://127.0.0.1:8108", "--key-env", "TB_SHOP_SEARCH_KEY")
    task = shop_suite.tasks.get(task_id="shop.py:test_open_and_close")
    attempt = Attempt(task=task)
    domain = runnable_domain(attempt)
    from tb_engine.spec_json import task_from_dict

    backend = backend_for_domain(domain, task_from_dict(task.spec))
    try:
        seen = backend.effects()["search_env"]
    finally:
        backend.close()
    assert seen == {"url": "http://127.0.0.1:8108", "host": "127.0.0.1", "port": "8108", "key_set": True}


@pytest.mark.django_db
def test_search_service_refuses_a_key_variable_no_admin_allowed(shop_suite, settings):
    settings.THINKINGBOX_SEARCH_KEY_ENVS = ["TYPESENSE_API_KEY"]
    with pytest.raises(CommandError) as caught:
        _search("--suite", "shop", "--url", "http://127.0.0.1:8108", "--key-env", "AWS_SECRET_ACCESS_KEY")
    with pytest.raises(CommandError) as literal:
        _search("--suite", "shop", "--url", "http://127.0.0.1:8108", "--key-env", "xyz-1234-secret")
    assert str(caught.value) == (
        "--key-env AWS_SECRET_ACCESS_KEY: not allowed; an admin lists the allowed variables in "
        "TB_SEARCH_KEY_ENVS (now: TYPESENSE_API_KEY)"
    )
    assert (
        str(literal.value) == "--key-env 'xyz-1234-secret': must be an environment variable name, not a key"
    )
    assert SearchService.objects.count() == 0


@pytest.mark.django_db
def test_search_service_site_default_and_off(shop_suite, settings):
    settings.THINKINGBOX_SEARCH_URL = "http://localhost:8108"
    settings.THINKINGBOX_SEARCH_KEY_ENV = "TYPESENSE_API_KEY"
    assert _search("--suite", "shop") == (
        "suite shop: search service http://localhost:8108 (key from $TYPESENSE_API_KEY) (site default)\n"
    )
    _search("--suite", "shop", "--url", "http://127.0.0.1:8108")
    settings.THINKINGBOX_SEARCH_URL = ""
    assert _search("--suite", "shop", "--off") == (
        "suite shop: search service none (knowledge-base search unavailable; scenario sources are left out of init)\n"
    )


@pytest.mark.django_db
def test_search_service_warns_that_the_real_servers_use_their_fixed_address(shop_suite):
    printed = _search("--suite", "shop", "--url", "http://search.internal:8108")
    assert printed.splitlines()[0] == (
        "warning: the tb_business_ops_servers_202606 servers connect to Typesense at 127.0.0.1:8108 "
        "whatever the URL; servers that read TYPESENSE_URL/TYPESENSE_HOST use this one"
    )


@pytest.mark.django_db
def test_search_key_variable_missing_on_the_worker_is_infra_error(
    shop_suite, alice, team_a, settings, monkeypatch
):
    settings.ATTEMPT_MAX_RETRIES = 0
    monkeypatch.delenv("TYPESENSE_API_KEY", raising=False)
    _search("--suite", "shop", "--url", "http://127.0.0.1:8108", "--key-env", "TYPESENSE_API_KEY")
    attempt = _run(shop_suite, alice, team_a).get(task__task_id="shop.py:test_open_and_close")
    assert (attempt.status, attempt.error_detail) == (
        "infra_error",
        "infra error during start: domain 'tb_test_shop': the search service's key variable "
        "TYPESENSE_API_KEY is not set on this worker",
    )


# --- bad input at run time: retried, then infra_error with the server's stderr --------------------


def _single_task_suite(tmp_path, name, source, **kwargs) -> Suite:
    dataset = write_dataset(tmp_path / name, [source])
    scenario = dataset / "scenario" / "tb_test_shop.yaml"
    scenario.write_text(
        scenario.read_text().replace(
            "  - name: get_ticket\n", "  - name: get_ticket\n  - name: crash_server\n"
        )
    )
    return _import(dataset, name, **kwargs)


@pytest.mark.django_db
def test_server_crash_mid_attempt_is_retried_then_infra_error_never_a_failure(
    tmp_path, alice, team_a, settings
):
    settings.ATTEMPT_MAX_RETRIES = 2
    golden = """\
        - tool: create_ticket
          parameters: {customer_id: C-1, subject: Late order}
        - tool: crash_server
          parameters: {code: 3}"""
    source = tb_test_source("test_crash", golden=golden)
    suite = _single_task_suite(tmp_path, "crashy", source)
    attempt = _run(suite, alice, team_a).get()
    summary = TaskSummary.objects.get(campaign=attempt.campaign)
    assert (attempt.status, attempt.verdict, attempt.retries) == ("infra_error", "", 2)
    assert attempt.error_detail.startswith("infra error during dialogue: MCP call crash_server failed")
    assert attempt.result["extra"]["backend"]["stderr_tail"].splitlines()[-1] == (
        "tb_test_shop: crashing on purpose with code 3"
    )
    assert (summary.n_done, summary.n_pass, summary.n_infra_error) == (0, 0, 1)


@pytest.mark.django_db
def test_server_that_will_not_start_is_retried_then_infra_error(tmp_path, alice, team_a, settings):
    settings.ATTEMPT_MAX_RETRIES = 1
    suite = _single_task_suite(
        tmp_path,
        "nostart",
        tb_test_source("test_x"),
        command=f"{MCP_COMMAND.split()[0]} -m tests.support.no_such_server",
    )
    attempt = _run(suite, alice, team_a).get()
    assert (attempt.status, attempt.retries) == ("infra_error", 1)
    assert attempt.error_detail.startswith("infra error during start: MCP server did not start")
    assert (
        "No module named 'tests.support.no_such_server'" in attempt.result["extra"]["backend"]["stderr_tail"]
    )


@pytest.mark.django_db
def test_init_error_from_a_bad_config_on_the_real_server_is_retried_then_infra_error(
    tmp_path, alice, team_a, settings, servers_python
):
    from tests.support.paths import THINKINGBOX_DIR

    settings.ATTEMPT_MAX_RETRIES = 1
    dataset = tmp_path / "bad-booking"
    (dataset / "scenario").mkdir(parents=True)
    (dataset / "test_case" / "external_booking_v1").mkdir(parents=True)
    (dataset / "scenario" / "external_booking_v1.yaml").write_text(
        (THINKINGBOX_DIR / "dataset" / "scenario" / "external_booking_v1.yaml").read_text()
    )
    golden = """\
        - tool: booking_api_get_booking
          parameters: {booking_id: BK-1}"""
    source = tb_test_source("test_bad_table", patch="{no_such_table: [{id: 1}]}", golden=golden)
    header = HEADER.replace("tb_test_shop", "external_booking_v1")
    (dataset / "test_case" / "external_booking_v1" / "bad.py").write_text(
        header + source.replace("tb_test_shop:", "external_booking_v1:")
    )
    suite = _import(
        dataset, "bad-booking", command=f"{servers_python} -m tb_business_ops_servers_202606.mcp_{{server}}"
    )
    attempt = _run(suite, alice, team_a).get()
    assert (attempt.status, attempt.retries) == ("infra_error", 1)
    assert attempt.error_detail == (
        "infra error during start: __reserved__init failed for bad.py:test_bad_table: "
        "Data patch validation failed: Unknown table 'no_such_table'"
    )
    assert "SandboxToolsSystemError" in attempt.result["extra"]["backend"]["init_traceback"]


# --- the attempt page --------------------------------------------------------------------------


@pytest.fixture
def infra_attempt(tmp_path, alice, team_a, settings) -> Attempt:
    settings.ATTEMPT_MAX_RETRIES = 0
    source = tb_test_source("test_escaped", patch="{'" + SCRIPT + "': [{id: W-1}]}")
    suite = _single_task_suite(tmp_path, "escaped", source)
    return _run(suite, alice, team_a).get()


@pytest.mark.django_db
def test_attempt_page_shows_the_servers_stderr_escaped_for_infra_errors(client, bob, infra_attempt):
    client.force_login(bob)
    page = client.get(f"/attempts/{infra_attempt.pk}/").content.decode()
    assert infra_attempt.status == "infra_error"
    assert SCRIPT not in page
    assert (
        '<pre id="server-stderr">tb_test_shop: init with 1 patched table(s)\n'
        "tb_test_shop: unknown table &lt;script&gt;alert(1)&lt;/script&gt;\n</pre>"
    ) in page


@pytest.mark.django_db
def test_attempt_page_says_knowledge_base_search_was_unavailable(client, bob, shop_suite, alice, team_a):
    attempt = _run(shop_suite, alice, team_a).get(task__task_id="shop.py:test_open_and_close")
    client.force_login(bob)
    page = client.get(f"/attempts/{attempt.pk}/").content.decode()
    assert (
        '<p class="error" id="kb-search"><strong>Knowledge-base search unavailable</strong>: no search service '
        "(Typesense) is configured for this suite. The scenario's 1 policy source were left out of "
        '<code>__reserved__init</code>, so the agent\'s search tool answers "Search service is not available".</p>'
    ) in page
    assert 'id="server-stderr"' not in page  # stderr is shown for infra errors only


@pytest.mark.django_db
def test_attempt_page_of_an_mcp_attempt_is_hidden_from_outsiders(client, charlie, erin, infra_attempt):
    codes = []
    for user in (charlie, erin):
        client.force_login(user)
        codes.append(client.get(f"/attempts/{infra_attempt.pk}/").status_code)
    assert codes == [403, 404]


# --- which server pools a worker warms -----------------------------------------------------------


@pytest.mark.django_db
def test_a_worker_warms_servers_only_for_domains_of_running_campaigns(shop_suite, alice, team_a, monkeypatch):
    from apps.campaigns.models import Campaign
    from apps.worker import execution

    warmed = []
    monkeypatch.setattr(execution, "pool_for", lambda config, size=None: warmed.append(config.command))
    campaign = campaign_create(
        name="shop golden",
        team=team_a,
        owner=alice,
        agent=agent_config_for("golden"),
        suite=shop_suite,
        n_attempts=1,
    )

    assert (execution.warm_mcp_servers(), warmed) == (0, [])  # a draft runs nothing yet

    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.RUNNING)
    assert execution.warm_mcp_servers() == 1
    assert len(warmed) == 1
