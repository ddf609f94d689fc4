"""A small ThinkingBox-format dataset written to a temp folder, served by tests/support/tb_mcp_server.py."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.paths import THINKINGBOX_DIR

ROOT = Path(__file__).resolve().parents[2]
SHARED = THINKINGBOX_DIR
MCP_COMMAND = f"{sys.executable} -m tests.support.tb_mcp_server"

SCENARIO = """\
world_state:
  tb_test_shop:
    sources:
      - name: Ticket policy.md
        snippets: ["Close tickets once the customer is helped."]
    data_patch: {}
tools:
  - name: create_ticket
  - name: update_ticket
  - name: get_ticket
bot_instructions: "You are a support agent for the test shop."
"""

HEADER = '''\
from thinkingbox.common import Judge, TestContext

"""!
scenario: tb_test_shop
"""


def validate_database(x: TestContext):
    result_db_hash = x.effects["tb_test_shop"]["result_db_hash"]
    golden_db_hash = x.effects["tb_test_shop"]["golden_db_hash"]
    if result_db_hash != golden_db_hash:
        assert False, "hash mismatch"

'''


def tb_test_source(
    name: str,
    *,
    query: str = "Please open a ticket about my late order and close it.",
    golden: str = "",
    body: str = "    validate_database(x)\n",
    patch: str = "{}",
) -> str:
    golden = (
        golden
        or """\
            - tool: create_ticket
              parameters: {customer_id: C-1, subject: Late order}
            - tool: update_ticket
              parameters: {ticket_id: "2", status: solved}"""
    )
    return (
        f"\ndef {name}(x: TestContext, judge: Judge):\n"
        f'    """!\n'
        f"    query: {query}\n"
        f"    user_context: You are Alex Kim.\n"
        f"    init:\n"
        f"      tb_test_shop:\n"
        f"        data_patch: {patch}\n"
        f"        golden_test_case:\n"
        f"          tool_interactions:\n"
        f"{textwrap.indent(textwrap.dedent(golden), ' ' * 10)}\n"
        f'    """\n\n'
        f"{body}"
    )


def write_dataset(folder: Path, functions: list[str]) -> Path:
    """scenario/tb_test_shop.yaml + test_case/tb_test_shop/shop.py in ``folder``."""
    (folder / "scenario").mkdir(parents=True, exist_ok=True)
    (folder / "test_case" / "tb_test_shop").mkdir(parents=True, exist_ok=True)
    (folder / "scenario" / "tb_test_shop.yaml").write_text(SCENARIO)
    (folder / "test_case" / "tb_test_shop" / "shop.py").write_text(HEADER + "\n".join(functions))
    return folder


@pytest.fixture
def shop_dataset(tmp_path) -> Path:
    return write_dataset(
        tmp_path / "dataset",
        [
            tb_test_source("test_open_and_close"),
            tb_test_source(
                "test_custom_body", body="    validate_database(x)\n    assert x.response.startswith('Hi')\n"
            ),
        ],
    )


def table_counts() -> dict[str, int]:
    """Row counts of every table the imports write (to show a failed import wrote nothing)."""
    from apps.agents.models import AgentConfig
    from apps.attempts.models import Attempt, TaskSummary
    from apps.campaigns.models import Campaign
    from apps.suites.models import Domain, Suite, Task

    return {
        m.__name__: m.objects.count()
        for m in (Suite, Domain, Task, AgentConfig, Campaign, Attempt, TaskSummary)
    }


@pytest.fixture
def real_servers_python(request) -> str:
    """The real ThinkingBox servers' interpreter.

    17-RUNTIME's session fixture ``servers_python`` (tests/conftest.py, which also builds the
    venv) when it is there; until then TB_SERVERS_PYTHON, skipping without it (failing on CI).
    """
    import os

    try:
        return str(request.getfixturevalue("servers_python"))
    except pytest.FixtureLookupError:
        pass
    python = os.environ.get("TB_SERVERS_PYTHON", "")
    if not python:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("TB_SERVERS_PYTHON is not set: the real ThinkingBox servers' venv is needed on CI")
        pytest.skip("TB_SERVERS_PYTHON is not set (the real ThinkingBox servers' venv)")
    return python
