"""An import-linter contract for the Django apps: each app is reached only through its front door.

``lint-imports`` (``python3 run.py check``) loads it through ``contract_types`` in pyproject.toml.
For every import from one app into another (``apps.<a>`` -> ``apps.<b>``, a != b) it requires:

* the imported module is one of app b's public modules (``public_modules``: services, selectors,
  models — or a module inside a ``services``/``selectors`` package), or one of the shared
  modules listed in ``shared_modules`` (e.g. ``apps.core.access``);
* no component of the imported module's name, and no name taken from it, starts with ``_``.

It reads the importing module's source (``ast``) to see every name a ``from … import`` takes,
including parenthesised multi-line ones.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output
from importlinter.application import contract_utils


@cache
def _from_imports(module: str) -> dict[int, tuple[str, ...]]:
    """Line number -> names taken by each ``from X import …`` statement of the module's source."""
    origin = _source_file(module)
    if origin is None:
        return {}
    tree = ast.parse(origin.read_text(encoding="utf-8"), filename=str(origin))
    return {
        node.lineno: tuple(alias.name for alias in node.names)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }


def _source_file(module: str) -> Path | None:
    """The module's source file, found from its top package's directory.

    Not ``importlib.util.find_spec(module)``: that imports every parent package, and a package
    whose ``__init__`` imports models (``apps.attempts.selectors``) needs Django set up, which the
    linter never does.
    """
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location).joinpath(*rest)
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


class AppBoundariesContract(Contract):
    type_name = "app_boundaries"

    apps_package = fields.StringField()
    public_modules = fields.ListField(subfield=fields.StringField())
    shared_modules = fields.ListField(subfield=fields.StringField(), required=False)
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)
    unmatched_ignore_imports_alerting = fields.EnumField(
        contract_utils.AlertLevel, default=contract_utils.AlertLevel.ERROR
    )

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph,
            ignore_imports=self.ignore_imports,  # type: ignore[arg-type]
            unmatched_alerting=self.unmatched_ignore_imports_alerting,  # type: ignore[arg-type]
        )
        prefix = f"{self.apps_package}."
        violations = []
        for importer in sorted(m for m in graph.modules if m.startswith(prefix)):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if not imported.startswith(prefix) or _app(imported) == _app(importer):
                    continue
                details = graph.get_import_details(importer=importer, imported=imported)
                for problem in self.problems(importer, imported, details):
                    violations.append({"importer": importer, "imported": imported, **problem})
        return ContractCheck(
            kept=not violations,
            metadata={"violations": violations},
            warnings=list(removal.warnings),
            ignored_import_count=len(removal.removed_imports),
        )

    def problems(self, importer: str, imported: str, details: list[dict]) -> list[dict]:
        """What is wrong with one app-to-app import: [{line, reason}], empty when it is allowed."""
        lines = sorted({detail["line_number"] for detail in details}) or [0]
        found = []
        if not self.is_public(imported):
            found.append(
                {"line": lines[0], "reason": f"not a public module of app {_app(imported)!r}: {imported}"}
            )
        # Inside a public package (apps.<b>.services.<module>): its private modules stay private.
        private_parts = [part for part in imported.split(".")[3:] if part.startswith("_")]
        if private_parts:
            found.append({"line": lines[0], "reason": f"private module {'.'.join(private_parts)}"})
        statements = _from_imports(importer)
        for line in lines:
            private = [name for name in statements.get(line, ()) if name.startswith("_")]
            if private:
                found.append({"line": line, "reason": f"private name {', '.join(private)}"})
        return found

    def is_public(self, module: str) -> bool:
        if module in (self.shared_modules or []):
            return True
        parts = module.split(".")
        return len(parts) >= 3 and parts[2] in self.public_modules

    def render_broken_contract(self, check: ContractCheck) -> None:
        for violation in check.metadata["violations"]:
            output.print_error(
                f"- {violation['importer']} -> {violation['imported']} (l.{violation['line']}): "
                f"{violation['reason']}",
                bold=False,
            )
        output.new_line()


def _app(module: str) -> str:
    return module.split(".")[1]
