"""validate_suite on an imported suite whose servers cannot help: the summary line last, names the cause,
and the command exits non-zero when no task could be validated (tasks left as they were)."""

from __future__ import annotations

import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.suites.models import Suite
from apps.triage.models import SuiteValidation, TaskValidation
from tests.engine.thinkingbox.test_seed_data import fake_servers
from tests.thinkingbox.conftest import shop_dataset  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_launch_defaults_from_the_environment(monkeypatch):
    for name in ("TB_MCP_COMMAND", "TB_MCP_URL", "TB_SERVERS_PYTHON"):
        monkeypatch.delenv(name, raising=False)


def _import(dataset, command: str, *extra) -> Suite:
    call_command(
        "import_thinkingbox", "--dataset", str(dataset), "--mcp-command", command, *extra, stdout=StringIO()
    )
    return Suite.objects.get()


def _validate(suite: Suite) -> tuple[list[str], str]:
    out = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("validate_suite", "--suite", suite.name, stdout=out)
    return out.getvalue().splitlines(), str(raised.value)


def test_validate_suite_on_servers_without_seed_data_says_so_last_and_touches_no_task(tmp_path, shop_dataset):
    toolset = fake_servers(tmp_path / "servers", seeded=False)
    suite = _import(
        shop_dataset,
        f"{sys.executable} -m fake_tb_servers.mcp_shop",
        "--mcp-env",
        f"PYTHONPATH={tmp_path / 'servers'}",
    )
    before = dict(suite.tasks.values_list("task_id", "validation"))

    lines, error = _validate(suite)

    assert lines[-1].startswith(
        "2 tasks: none validated: the ThinkingBox servers were installed without their seed data"
    )
    assert f"{toolset / 'initial_data'} is missing or empty" in lines[-1]
    assert error == f"no task of suite {suite.name!r} could be validated"
    assert dict(suite.tasks.values_list("task_id", "validation")) == before
    assert (TaskValidation.objects.count(), SuiteValidation.objects.get().status) == (0, "failed")


def test_validate_suite_exits_non_zero_when_every_task_errored(tmp_path, shop_dataset):
    suite = _import(shop_dataset, f"{tmp_path / 'no-such-python'} -m fake_tb_servers.mcp_shop")

    lines, error = _validate(suite)

    assert error == f"no task of suite {suite.name!r} could be validated"
    assert (
        lines[-1]
        == "2 tasks: 0 valid, 0 invalid, 0 non-discriminating, 2 not validated (infrastructure error)"
    )
    assert lines[0] == "shop.py:test_custom_body: unknown"
