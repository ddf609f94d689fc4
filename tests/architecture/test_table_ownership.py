"""Each app writes only its own tables: no app calls a write on another app's model manager.

A static check over apps/ (migrations aside): for every model imported from another app's
``models``, no ``Model.objects….create / get_or_create / update_or_create / bulk_create /
bulk_update / update / delete(…)`` chain. Writes through an instance (``row.save()``) or a
related manager (``team.members.add``) are beyond what a syntax check can see; review covers them.
"""

from __future__ import annotations

import ast
from pathlib import Path

APPS = Path(__file__).resolve().parents[2] / "apps"
WRITES = {"create", "get_or_create", "update_or_create", "bulk_create", "bulk_update", "update", "delete"}


def foreign_models(tree: ast.AST, app: str) -> dict[str, str]:
    """Local name -> owning app, for each model the module imports from another app's models."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("apps."):
            parts = node.module.split(".")
            if len(parts) == 3 and parts[2] == "models" and parts[1] != app:
                found.update({alias.asname or alias.name: parts[1] for alias in node.names})
    return found


def manager_writes(tree: ast.AST, models: dict[str, str]):
    """(line, model, method) of every write call whose receiver chain starts at Model.objects."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in WRITES:
            continue
        attributes, receiver = [], node.func.value
        while isinstance(receiver, ast.Attribute | ast.Call):
            if isinstance(receiver, ast.Attribute):
                attributes.append(receiver.attr)
                receiver = receiver.value
            else:
                receiver = receiver.func
        if isinstance(receiver, ast.Name) and receiver.id in models and "objects" in attributes:
            yield node.lineno, receiver.id, node.func.attr


def writes_outside_their_app() -> list[str]:
    found = []
    for path in sorted(APPS.rglob("*.py")):
        relative = path.relative_to(APPS)
        if "migrations" in relative.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        models = foreign_models(tree, relative.parts[0])
        for line, model, method in manager_writes(tree, models):
            found.append(f"apps/{relative}:{line}: {model}.objects….{method} (owned by apps.{models[model]})")
    return found


def test_no_app_writes_another_apps_tables():
    assert writes_outside_their_app() == []


def test_the_check_sees_a_write_through_a_queryset_chain():
    tree = ast.parse(
        "from apps.campaigns.models import Attempt\n"
        "from apps.triage.models import Label\n"
        "Attempt.objects.filter(id=1).select_related('task').update(status='done')\n"
        "Label.objects.create(name='x')\n"
        "Attempt.objects.filter(id=1).count()\n"
    )
    models = foreign_models(tree, "triage")

    assert list(manager_writes(tree, models)) == [(3, "Attempt", "update")]
