"""seed_data: a ThinkingBox server package installed without its initial_data/*.json is named, others pass."""

from __future__ import annotations

import sys
from pathlib import Path

from tb_engine.thinkingbox.seed_data import seed_data_problem, served_package


def fake_servers(root: Path, *, seeded: bool) -> Path:
    """A package shaped like ThinkingBox's servers: toolslib/shop/{tools/, models.py[, initial_data/]}."""
    toolset = root / "fake_tb_servers" / "toolslib" / "shop"
    (toolset / "tools").mkdir(parents=True)
    for folder in (
        root / "fake_tb_servers",
        root / "fake_tb_servers" / "toolslib",
        toolset,
        toolset / "tools",
    ):
        (folder / "__init__.py").write_text("")
    (toolset / "models.py").write_text("")
    (root / "fake_tb_servers" / "mcp_shop.py").write_text("")
    if seeded:
        (toolset / "initial_data").mkdir()
        (toolset / "initial_data" / "orders.json").write_text("[]")
    return toolset


def _probe(root: Path) -> str:
    return seed_data_problem(
        command=sys.executable, args=["-m", "fake_tb_servers.mcp_shop"], env={"PYTHONPATH": str(root)}
    )


def test_served_package_is_the_top_package_of_a_python_m_launch():
    assert [served_package(args) for args in (["-m", "pkg.mcp_x"], ["server.py"], ["-m"])] == ["pkg", "", ""]


def test_seed_data_problem_names_the_package_folder_and_a_missing_seed_folder(tmp_path):
    toolset = fake_servers(tmp_path, seeded=False)

    problem = _probe(tmp_path)

    assert problem == (
        "the ThinkingBox servers were installed without their seed data: package fake_tb_servers "
        f"({tmp_path / 'fake_tb_servers'}, run by {sys.executable}) holds no initial_data/*.json, e.g. "
        f"{toolset / 'initial_data'} is missing or empty; a regular pip install leaves these folders "
        "behind, so install the package editable from a copy of its source"
    )


def test_seed_data_problem_is_empty_for_a_seeded_package(tmp_path):
    fake_servers(tmp_path, seeded=True)

    assert _probe(tmp_path) == ""


def test_seed_data_problem_is_empty_for_a_server_that_is_no_toolset_package_or_cannot_run(tmp_path):
    assert seed_data_problem(command=sys.executable, args=["-m", "tests.support.tb_mcp_server"]) == ""
    assert seed_data_problem(command=str(tmp_path / "no-python"), args=["-m", "pkg.mcp_x"]) == ""
    assert seed_data_problem(command=sys.executable, args=["-m", "no_such_package_here.mcp_x"]) == ""
