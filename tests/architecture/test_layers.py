"""The apps' `layers` import contract (pyproject.toml) can fail, and docs/architecture.md draws it.

The contract is checked on the real import graph with one import or app added, so a contract that
could not fail (a misspelt layer, a container that matches nothing) fails here instead of passing
quietly in `run.py check`.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import grimp
import importlinter.cli  # noqa: F401  (configures import-linter: its readers of pyproject.toml)
import pytest
from importlinter.application.use_cases import read_user_options
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[2]
# The Django shell's rows in the picture: "│ <label, 13 wide> <layer as the contract writes it> │".
LABEL_WIDTH = 13


def _layers_contract() -> LayersContract:
    options = read_user_options(config_filename=str(ROOT / "pyproject.toml"))
    (contract_options,) = [c for c in options.contracts_options if c["type"] == "layers"]
    return LayersContract(
        name=contract_options["name"],
        session_options=options.session_options,
        contract_options=contract_options,
    )


@pytest.fixture(scope="module")
def project_graph() -> grimp.ImportGraph:
    root_packages = _layers_contract().session_options["root_packages"]
    return grimp.build_graph(*root_packages, cache_dir=None)


@pytest.fixture
def graph(project_graph) -> grimp.ImportGraph:
    return copy.deepcopy(project_graph)


def _broken_pairs(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    check = _layers_contract().check(graph, verbose=False)
    pairs = sorted((d["importer"], d["imported"]) for d in check.metadata["invalid_dependencies"])
    assert check.kept == (not pairs and not check.metadata["undeclared_modules"])
    return pairs


def test_layers_contract_is_kept_by_the_apps_as_they_are(graph):
    check = _layers_contract().check(graph, verbose=False)

    assert (check.kept, check.metadata["undeclared_modules"]) == (True, set())


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("apps.core.models", "apps.dashboard.views"),  # base -> pages
        ("apps.worker.execution", "apps.triage.services"),  # runtime -> pages (moved out of the worker)
        ("apps.figures.selectors", "apps.gates.selectors"),  # figures -> verdicts
        ("apps.campaigns.services", "apps.worker.selectors"),  # campaigns sends tasks by name only
        ("apps.campaigns.services", "apps.adaptive.services"),
        ("apps.suites.models", "apps.campaigns.models"),
        ("apps.agents.models", "apps.suites.models"),  # "|": apart within the row
        ("apps.drift.evaluation", "apps.gates.selectors"),  # "|": apart within the row
    ],
)
def test_an_import_against_the_layers_breaks_the_contract(graph, importer, imported):
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import x")

    assert _broken_pairs(graph) == [(".".join(importer.split(".")[:2]), ".".join(imported.split(".")[:2]))]


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("apps.api.views_meta", "apps.worker.selectors"),  # pages -> runtime
        ("apps.triage.views", "apps.training.pools"),  # ":": the pages may import each other
        ("apps.core.models", "tb_engine.spec"),  # the engine is not an app
    ],
)
def test_an_import_down_or_within_a_joined_row_keeps_the_contract(graph, importer, imported):
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import x")

    assert _broken_pairs(graph) == []


def test_an_app_without_a_row_breaks_the_contract(graph):
    graph.add_module("apps.newcomer")

    check = _layers_contract().check(graph, verbose=False)

    assert (check.kept, check.metadata["undeclared_modules"]) == (False, {"apps.newcomer"})


def test_the_attempts_app_sits_below_campaigns_and_above_suites_agents_and_core(graph):
    graph.add_module("apps.attempts")
    for importer, imported in [
        ("apps.campaigns.services", "apps.attempts.services"),
        ("apps.attempts.services", "apps.suites.models"),
        ("apps.attempts.services", "apps.agents.models"),
        ("apps.attempts.services", "apps.core.batches"),
    ]:
        graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import x")
    assert _broken_pairs(graph) == []

    graph.add_import(
        importer="apps.attempts.models",
        imported="apps.campaigns.models",
        line_number=1,
        line_contents="import x",
    )

    assert _broken_pairs(graph) == [("apps.attempts", "apps.campaigns")]


def _picture_rows() -> list[str]:
    """The layers of the Django shell box in docs/architecture.md, top to bottom, as written there."""
    lines = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
    top = next(i for i, line in enumerate(lines) if "Django shell: apps/" in line)
    bottom = next(i for i in range(top, len(lines)) if lines[i].lstrip().startswith("└"))
    rows = []
    for line in lines[top + 1 : bottom]:
        inner = line.split("│")[1]  # between the box's left and right border
        rows.append(inner[1 + LABEL_WIDTH :].strip())
    return rows


def test_architecture_picture_draws_the_layers_contract_row_by_row():
    contract_layers = [
        re.sub(r"\s+", " ", layer.strip()) for layer in _layers_contract().contract_options["layers"]
    ]

    assert _picture_rows() == contract_layers


def test_who_owns_what_names_every_app_the_contract_places():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table_apps = set(re.findall(r"^\| `apps/(\w+)` \|", text, flags=re.MULTILINE))
    app_dirs = {path.parent.name for path in (ROOT / "apps").glob("*/__init__.py")}
    placed = set(re.findall(r"\w+", " ".join(_layers_contract().contract_options["layers"])))

    assert (table_apps, app_dirs - placed) == (app_dirs, set())
