"""The launch config import_thinkingbox stores from the real servers.yaml starts the real servers."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from apps.suites.models import Domain
from tb_engine.spec_json import domain_from_dict
from tb_engine.thinkingbox.mcp_config import launch_config
from tb_engine.thinkingbox.mcp_pool import McpServerPool
from tests.thinkingbox.conftest import SHARED


@pytest.mark.django_db
def test_stored_launch_config_starts_the_real_server_serving_the_scenario_tools(real_servers_python):
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(SHARED / "dataset"),
        "--test-list",
        str(SHARED / "releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml"),
        "--servers",
        str(SHARED / "servers/servers.yaml"),
        "--python",
        real_servers_python,
        stdout=StringIO(),
    )
    for name in ("sandbox_external_retail", "external_booking_v1"):
        domain = domain_from_dict(Domain.objects.get(name=name).spec)
        pool = McpServerPool(launch_config(domain), size=1)
        try:
            session = pool.acquire()
            listed = {tool["name"] for tool in session.list_tools()}
            session.close()
        finally:
            pool.close()
        assert set(domain.tools) <= listed
        assert {"__reserved__init", "__reserved__geteffects"} <= listed
