"""Every third-party package the product code imports is declared in pyproject.toml.

A package that only arrives as another one's dependency (httpx2 through openai, numpy through
pandas) disappears the day that dependency drops it; importing it directly means declaring it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PRODUCT_PACKAGES = ("tb_engine", "tb_envserver", "apps", "thinkingbox_web")


def imported_top_level_modules() -> dict[str, str]:
    """Top-level module -> first file importing it, for every absolute import in the product code."""
    found: dict[str, str] = {}
    for package in PRODUCT_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def declared_distributions() -> set[str]:
    """The project's dependencies, plus the extras product code may use (not dev: tests only).

    The `training` extra's packages (openenv-core, trl, ...) are imported only where a trainer uses
    them, with that extra installed.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"], *project["optional-dependencies"]["training"]]
    return {canonicalize_name(Requirement(line).name) for line in lines}


def test_every_imported_third_party_package_is_declared():
    distributions = importlib.metadata.packages_distributions()
    declared = declared_distributions()
    undeclared = {}
    for module, where in imported_top_level_modules().items():
        if module in sys.stdlib_module_names or module in PRODUCT_PACKAGES:
            continue
        providers = {canonicalize_name(name) for name in distributions.get(module, [])}
        if not providers & declared:
            undeclared[module] = where
    assert undeclared == {}
