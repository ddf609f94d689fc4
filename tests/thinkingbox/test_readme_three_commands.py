"""The README's "ThinkingBox-Bench in three commands" stays true: its manage.py lines parse and the import runs."""

from __future__ import annotations

import os
import shlex
import sys
from io import StringIO

import pytest
from django.core.management import call_command, load_command_class

from apps.suites.models import Domain, Suite
from tests.thinkingbox.conftest import ROOT, SHARED

SECTION = "## ThinkingBox-Bench in three commands"


def _commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = text[text.index(SECTION) :].split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line) for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_section_has_three_commands_servers_import_campaign():
    commands = _commands()
    assert len(commands) == 3
    assert commands[0][:2] == ["cp", "-r"] and "'fastmcp>=3,<4'" in shlex.join(commands[0])
    assert [c[2] for c in commands[1:]] == ["import_thinkingbox", "run_campaign"]


def _parsed(position: int):
    argv = _commands()[position]
    app = "apps.thinkingbox" if argv[2] == "import_thinkingbox" else "apps.campaigns"
    # parse_args exits (SystemExit) on an unknown or malformed option
    return load_command_class(app, argv[2]).create_parser("manage.py", argv[2]).parse_args(argv[3:])


def test_readme_import_and_campaign_lines_parse_with_the_real_commands():
    imported = _parsed(1)
    assert (imported.servers, imported.python) == (
        "../shared/thinkingbox/servers/servers.yaml",
        "../tb-servers/.venv/bin/python",
    )
    campaign = _parsed(2)
    assert (campaign.suite, campaign.agent, campaign.repeat, campaign.wait) == (
        "thinkingbox-bench",
        "golden",
        1,
        True,
    )


@pytest.mark.django_db
def test_readme_import_line_imports_the_shipped_folder(monkeypatch):
    argv = _commands()[1][3:]
    argv[argv.index("--python") + 1] = sys.executable  # step 1's venv is not built in this test
    monkeypatch.chdir(ROOT)
    if not (ROOT.parent / "shared").exists():  # the README's relative paths need ../shared beside us
        pytest.skip(f"{ROOT.parent / 'shared'} is not there (shared folder is {SHARED})")
    out = StringIO()
    call_command("import_thinkingbox", *argv, stdout=out)
    assert (
        out.getvalue().splitlines()[0].startswith("Suite thinkingbox-bench v1.0 (evaluation only): 202 new")
    )
    launch = Domain.objects.get(suite=Suite.objects.get(name="thinkingbox-bench"), name="external_booking_v1")
    assert launch.spec["mcp"]["launch"]["command"] == os.path.abspath(sys.executable)
    assert launch.spec["mcp"]["launch"]["args"] == [
        "-m",
        "tb_business_ops_servers_202606.mcp_external_booking_v1",
    ]
