"""Only apps/attempts queries the attempt record or reads a stored result by key (issue 24).

A static check (``ast``, not text search, so a foreign key, a type hint or ``Attempt.Status.DONE``
is never mistaken for a query) over every module of apps/ outside apps/attempts (migrations aside;
bench/ is out of scope). It reports ``file:line: what`` for:

* a manager of an attempt model imported from apps.attempts.models (``Attempt.objects``,
  ``._default_manager``, ``.objects.raw``);
* a query through one of their reverse relations: ``campaign.attempts.filter(…)``, a lookup
  ``attempts__status=…`` or ``Count("attempts")`` (the names are read from the models);
* a string naming one of their tables (raw SQL);
* a key read of a stored result: ``x.result[…]``, ``x.result.get(…)``, ``["result"]``, ``result__…``.

Other apps ask apps.attempts.selectors (reads) and apps.attempts.services (writes) instead, and
read a result through the typed reader (apps.attempts.selectors.results). Templates must not reach
into the result either: a ``.result.`` in templates/ is reported too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWNER = "attempts"
MODELS_MODULE = "apps.attempts.models"
ATTEMPT_MODELS = frozenset(
    {"Attempt", "AttemptSignature", "SignatureVariant", "TaskSummary", "SignatureCount", "AttemptProcessRisk"}
)
TABLES = (
    "campaigns_attempt",
    "campaigns_tasksummary",
    "campaigns_attemptsignature",
    "campaigns_signaturevariant",
    "campaigns_signaturecount",
    "attempts_attemptprocessrisk",
)
MANAGERS = frozenset({"objects", "_default_manager", "_base_manager"})
# What can follow a related manager; a plain attribute read (``report.attempts``) is no query.
QUERYSET_METHODS = frozenset(
    {
        "aggregate", "alias", "all", "annotate", "bulk_create", "count", "create", "dates", "defer",
        "delete", "distinct", "earliest", "exclude", "exists", "extra", "filter", "first", "get",
        "get_or_create", "in_bulk", "iterator", "last", "latest", "none", "only", "order_by",
        "prefetch_related", "raw", "reverse", "select_for_update", "select_related", "update",
        "update_or_create", "using", "values", "values_list",
    }
)  # fmt: skip
# Calls whose string arguments are lookups (``Count("attempts")``, ``.values("attempts__id")``);
# elsewhere a string "attempts" is a word, a dict key or a column name.
LOOKUP_CALLS = frozenset(
    {
        "Avg", "Count", "F", "FilteredRelation", "Max", "Min", "Prefetch", "StdDev", "Sum", "Variance",
        "defer", "distinct", "only", "order_by", "prefetch_related", "select_related", "values",
        "values_list",
    }
)  # fmt: skip
# Reviewed look-alikes: (module, receiver) pairs whose ``.result`` / ``["result"]`` is no attempt's.
NOT_AN_ATTEMPT_RESULT = frozenset(
    {
        # drift's WatchRun.result: a watch run's own figures and comparisons, drift's table.
        ("apps/drift/services.py", "run.result"),
        # The export form's "include the result" flag.
        ("apps/api/views_exports.py", "query"),
        # The before/after report the training page shows.
        ("apps/training/views.py", "context"),
    }
)
TEMPLATE_RESULT_ACCESS = re.compile(r"\.result\.")


@dataclass(frozen=True)
class Relations:
    """The names other models reach the attempt models by: managers (``campaign.attempts``) and
    single rows (``attempt.failure_signature``), read from the models."""

    managers: frozenset[str]
    singles: frozenset[str]

    @property
    def lookups(self) -> frozenset[str]:
        return self.managers | self.singles


@cache
def reverse_relations() -> Relations:
    from django.apps import apps as registry

    managers, singles = set(), set()
    for model in registry.get_app_config(OWNER).get_models():
        for field in model._meta.get_fields():
            if not (field.concrete and field.is_relation and (field.many_to_one or field.one_to_one)):
                continue
            default = model._meta.model_name + ("" if field.one_to_one else "_set")
            name = field.remote_field.related_name or default
            if not name.endswith("+"):
                (singles if field.one_to_one else managers).add(name)
    return Relations(managers=frozenset(managers), singles=frozenset(singles))


def _imported_models(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Local names of the attempt models the module imports, and local names of the models module."""
    models, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == MODELS_MODULE:
            models |= {alias.asname or alias.name for alias in node.names if alias.name in ATTEMPT_MODELS}
        elif isinstance(node, ast.ImportFrom) and node.module == MODELS_MODULE.rpartition(".")[0]:
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "models"}
        elif isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == MODELS_MODULE}
    return models, modules


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes: prose may name a table without querying it."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _is_model(node: ast.expr, models: set[str], modules: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in models
    return (
        isinstance(node, ast.Attribute)
        and node.attr in ATTEMPT_MODELS
        and ast.unparse(node.value) in modules | {MODELS_MODULE}
    )


def _is_lookup(text: str, relations: Relations) -> bool:
    return text.split("__", 1)[0] in relations.lookups


def _called_name(call: ast.Call) -> str:
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def offences(source: str, *, module: str, relations: Relations) -> Iterator[tuple[int, str]]:
    """(line, what) of every query on the attempt record and every key read of a result in ``source``."""
    tree = ast.parse(source)
    models, modules = _imported_models(tree)
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in MANAGERS and _is_model(node.value, models, modules):
                yield node.lineno, f"{ast.unparse(node)} (a query on the attempt record)"
            elif (
                node.attr in QUERYSET_METHODS
                and isinstance(node.value, ast.Attribute)
                and node.value.attr in relations.managers
            ):
                yield node.lineno, f".{node.value.attr}.{node.attr} (a query through a reverse relation)"
            elif node.attr in relations.singles:
                yield node.lineno, f".{node.attr} (a query through a reverse relation)"
        if isinstance(node, ast.Call):
            for argument in node.args if _called_name(node) in LOOKUP_CALLS else ():
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                    if _is_lookup(argument.value, relations):
                        yield argument.lineno, f'"{argument.value}" (a lookup into the attempt record)'
            for keyword in node.keywords:
                # attempts__status=…; a bare attempts=… is a function's argument, not a lookup.
                if keyword.arg and "__" in keyword.arg and _is_lookup(keyword.arg, relations):
                    yield node.lineno, f"{keyword.arg}= (a lookup into the attempt record)"
                elif keyword.arg and keyword.arg.startswith("result__"):
                    yield node.lineno, f"{keyword.arg}= (a JSON key lookup into the result)"
            if (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "result"
                and (module, ast.unparse(node.func.value)) not in NOT_AN_ATTEMPT_RESULT
            ):
                yield node.lineno, f"{ast.unparse(node.func)}( (a key read of the result)"
        if isinstance(node, ast.Subscript):
            if (
                isinstance(node.value, ast.Attribute)
                and node.value.attr == "result"
                and (module, ast.unparse(node.value)) not in NOT_AN_ATTEMPT_RESULT
            ):
                yield node.lineno, f"{ast.unparse(node.value)}[ (a key read of the result)"
            if (
                isinstance(node.slice, ast.Constant)
                and node.slice.value == "result"
                and (module, ast.unparse(node.value)) not in NOT_AN_ATTEMPT_RESULT
            ):
                yield node.lineno, f'{ast.unparse(node.value)}["result"] (a key read of the result)'
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            tables = [table for table in TABLES if re.search(rf"\b{table}\b", node.value)]
            if tables:
                yield node.lineno, f"{', '.join(tables)} (the attempt record's table in a string)"
            if node.value.startswith("result__"):
                yield node.lineno, f'"{node.value}" (a JSON key lookup into the result)'


def _sorted(found: Iterator[tuple[int, str]]) -> list[tuple[int, str]]:
    return sorted(set(found))


def app_offences() -> list[str]:
    """``file:line: what`` for every module of apps/ outside the attempt record's own app."""
    relations = reverse_relations()
    found = []
    for path in sorted((ROOT / "apps").rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[1] == OWNER or "migrations" in relative.parts:
            continue
        module = relative.as_posix()
        source = path.read_text(encoding="utf-8")
        found += [
            f"{module}:{line}: {what}"
            for line, what in _sorted(offences(source, module=module, relations=relations))
        ]
    return found


def template_offences() -> list[str]:
    """``file:line: .result.`` for every template line that reaches into a result."""
    found = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if TEMPLATE_RESULT_ACCESS.search(line):
                found.append(
                    f"{path.relative_to(ROOT).as_posix()}:{number}: .result. (a key read of the result)"
                )
    return found


def test_no_app_outside_attempts_queries_the_attempt_record_or_reads_a_result_by_key():
    assert app_offences() == []


def test_no_template_reads_a_result_by_key():
    assert template_offences() == []


# --- The check itself -------------------------------------------------------------------------


def test_reverse_relation_names_are_read_from_the_models():
    assert reverse_relations() == Relations(
        managers=frozenset({"attempts", "summaries", "signature_counts"}),
        singles=frozenset({"failure_signature", "process_risk"}),
    )


OFFENDING = '''
"""Docstrings may name campaigns_attempt."""
from apps.attempts.models import Attempt, TaskSummary as Summary
from apps.attempts import models as attempt_models
from django.db.models import Count, F

Attempt.objects.filter(campaign_id=1)
Summary._default_manager.all()
attempt_models.SignatureCount.objects.raw("SELECT * FROM campaigns_signaturecount")
campaign.attempts.filter(status="done")
task.summaries.values("n_done")
Campaign.objects.annotate(n=Count("attempts"), m=Count("id", filter=Q(attempts__status="done")))
attempt.result["diff"]
attempt.result.get("checks")
row["result"]
Attempt.objects.values_list("result__rubrics", flat=True)
qs.filter(result__extra__thinkingbox__disagree=True)
attempt.failure_signature.digest
'''

ALLOWED = """
from apps.attempts.models import IN_FLIGHT, Attempt
from django.db import models

class Review(models.Model):
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE)

def label(attempt: Attempt, attempts: list[Attempt]) -> str:
    if attempt.status == Attempt.Status.DONE and attempt.verdict == Attempt.Verdict.PASS:
        return f"{report.attempts} attempts, {len(attempts)}"
    context = {"attempts": attempts, "result": 1}
    attempts_import(campaign_id=1, attempts=attempts)
    Column("attempts", "attempts per task", "int")
    return context["attempts"]

run.result.get("figures")
"""


def test_the_check_reports_each_query_and_key_read_by_line():
    found = _sorted(offences(OFFENDING, module="apps/demo/x.py", relations=reverse_relations()))

    assert found == [
        (7, "Attempt.objects (a query on the attempt record)"),
        (8, "Summary._default_manager (a query on the attempt record)"),
        (9, "attempt_models.SignatureCount.objects (a query on the attempt record)"),
        (9, "campaigns_signaturecount (the attempt record's table in a string)"),
        (10, ".attempts.filter (a query through a reverse relation)"),
        (11, ".summaries.values (a query through a reverse relation)"),
        (12, '"attempts" (a lookup into the attempt record)'),
        (12, "attempts__status= (a lookup into the attempt record)"),
        (13, "attempt.result[ (a key read of the result)"),
        (14, "attempt.result.get( (a key read of the result)"),
        (15, 'row["result"] (a key read of the result)'),
        (16, '"result__rubrics" (a JSON key lookup into the result)'),
        (16, "Attempt.objects (a query on the attempt record)"),
        (17, "result__extra__thinkingbox__disagree= (a JSON key lookup into the result)"),
        (18, ".failure_signature (a query through a reverse relation)"),
    ]


def test_the_check_allows_foreign_keys_type_hints_choices_and_reviewed_look_alikes():
    found = _sorted(offences(ALLOWED, module="apps/drift/services.py", relations=reverse_relations()))

    assert found == []


def test_the_reviewed_look_alike_is_reported_anywhere_else():
    found = _sorted(offences(ALLOWED, module="apps/demo/x.py", relations=reverse_relations()))

    assert found == [(16, "run.result.get( (a key read of the result)")]
