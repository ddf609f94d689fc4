"""Load and validate suites, domains and tasks from YAML (docs/task-format.md).

Every problem is reported as ``file: task <id>: <field.path>: message`` and all problems of a
file are collected into one SpecError, so an author fixes them in one pass.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from tb_engine.spec import CheckSpec, DomainSpec, GoldenCall, SuiteSpec, TableSpec, TaskSpec, ToolSpec
from tb_engine.textfile import NotText, read_text
from tb_engine.yaml_bounded import load_yaml

SUITES_DIR = Path(__file__).resolve().parent / "suites"
COLUMN_TYPES = ("text", "integer", "real", "boolean", "json")
CHECK_KINDS = ("row_equals", "row_count", "no_new_rows", "unchanged", "custom_unsupported")
CHECK_FIELDS = {
    "row_equals": {"table", "key", "fields"},
    "row_count": {"table", "where", "count"},
    "no_new_rows": {"table"},
    "unchanged": {"table", "except"},
    "custom_unsupported": {"detail"},
}
CHECK_REQUIRED = {
    "row_equals": {"table", "key", "fields"},
    "row_count": {"table", "count"},
    "no_new_rows": {"table"},
    "unchanged": {"table"},
    "custom_unsupported": set(),
}
TASK_FIELDS = {
    "id",
    "title",
    "tags",
    "query",
    "user_context",
    "data_patch",
    "golden",
    "checks",
    "rubrics",
    "reply",
}


class SpecError(Exception):
    """A suite, domain or task file is invalid; ``errors`` lists every problem found."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


class _Problems:
    """Collects errors for one file, each prefixed with the file and (when set) the task id."""

    def __init__(self, path: Path):
        self.path = path
        self.errors: list[str] = []

    def add(self, field: str, message: str, task_id: str | None = None) -> None:
        where = f"{self.path}: " + (f"task {task_id}: " if task_id is not None else "")
        self.errors.append(f"{where}{field}: {message}")

    def raise_if_any(self) -> None:
        if self.errors:
            raise SpecError(self.errors)


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise SpecError([f"{path}: file not found"])
    try:
        return load_yaml(read_text(path, "YAML"))
    except NotText as exc:
        raise SpecError([f"{path}:{exc.line}: {exc.message}"]) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None)
        if mark is None or not problem:
            raise SpecError([f"{path}: invalid YAML: {exc}"]) from exc
        raise SpecError([f"{path}:{mark.line + 1}: invalid YAML: {problem}"]) from exc


def _type_ok(column_type: str, value: Any) -> bool:
    if (
        value is None or column_type == "json" or column_type not in COLUMN_TYPES
    ):  # bad types reported once, at the column
        return True
    if column_type == "text":
        return isinstance(value, str)
    if column_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if column_type == "real":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, bool) or value in (0, 1)


def _check_row(
    problems: _Problems, spec: TableSpec, row: Any, field: str, task_id: str | None, *, full_key: bool
) -> None:
    if not isinstance(row, dict):
        problems.add(field, "must be a mapping of column -> value", task_id)
        return
    for column, value in row.items():
        if column not in spec.columns:
            problems.add(f"{field}.{column}", f"unknown column of table {spec.name}", task_id)
        elif not _type_ok(spec.columns[column], value):
            problems.add(f"{field}.{column}", f"expected {spec.columns[column]}, got {value!r}", task_id)
    if full_key:
        for column in spec.primary_key:
            if row.get(column) is None:
                problems.add(f"{field}.{column}", "primary key column is required", task_id)


def _check_rows(
    problems: _Problems, tables: dict[str, TableSpec], data: Any, field: str, task_id: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.add(field, "must be a mapping of table -> list of rows", task_id)
        return {}
    clean: dict[str, list[dict[str, Any]]] = {}
    for table, rows in data.items():
        if table not in tables:
            problems.add(f"{field}.{table}", "unknown table", task_id)
            continue
        if not isinstance(rows, list):
            problems.add(f"{field}.{table}", "must be a list of rows", task_id)
            continue
        seen = set()
        for i, row in enumerate(rows):
            _check_row(problems, tables[table], row, f"{field}.{table}[{i}]", task_id, full_key=True)
            if isinstance(row, dict):
                key = tuple(row.get(c) for c in tables[table].primary_key)
                try:
                    hash(key)
                except TypeError:  # a key column holding a list or mapping: reported at the column
                    continue
                if key in seen:
                    problems.add(f"{field}.{table}[{i}]", f"duplicate primary key {key}", task_id)
                seen.add(key)
        clean[table] = [dict(row) for row in rows if isinstance(row, dict)]
    return clean


def _load_tables(problems: _Problems, raw: Any) -> dict[str, TableSpec]:
    tables: dict[str, TableSpec] = {}
    if not isinstance(raw, dict) or not raw:
        problems.add("tables", "must be a non-empty mapping of table name -> definition")
        return tables
    for name, body in raw.items():
        field = f"tables.{name}"
        if not isinstance(body, dict):
            problems.add(field, "must be a mapping")
            continue
        for extra in sorted(set(body) - {"primary_key", "columns", "unstable", "generated_key"}):
            problems.add(f"{field}.{extra}", "unknown field")
        columns = body.get("columns")
        if not isinstance(columns, dict) or not columns:
            problems.add(f"{field}.columns", "must be a non-empty mapping of column -> type")
            continue
        for column, kind in columns.items():
            if kind not in COLUMN_TYPES:
                problems.add(
                    f"{field}.columns.{column}",
                    f"unknown type {kind!r} (use one of {', '.join(COLUMN_TYPES)})",
                )
        primary_key = body.get("primary_key")
        if isinstance(primary_key, str):
            primary_key = [primary_key]
        if not isinstance(primary_key, list) or not primary_key:
            problems.add(f"{field}.primary_key", "must be a non-empty list of columns")
            primary_key = []
        for column in primary_key:
            if column not in columns:
                problems.add(f"{field}.primary_key", f"unknown column {column!r}")
        unstable = body.get("unstable") or []
        if not isinstance(unstable, list):
            problems.add(f"{field}.unstable", "must be a list of columns")
            unstable = []
        for column in unstable:
            if column not in columns:
                problems.add(f"{field}.unstable", f"unknown column {column!r}")
        generated = body.get("generated_key", False)
        if not isinstance(generated, bool):
            problems.add(f"{field}.generated_key", "must be true or false")
        tables[name] = TableSpec(
            name=name,
            columns=dict(columns),
            primary_key=tuple(primary_key),
            unstable=frozenset(unstable),
            generated_key=bool(generated),
        )
    return tables


def _import_tools(problems: _Problems, path: Path, domain_name: str) -> ModuleType | None:
    if not path.is_file():
        return None
    module_name = f"tb_engine_suite_tools_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if (
        spec is None or spec.loader is None
    ):  # not a loadable Python file (spec_from_file_location says so with None)
        problems.add("tools.py", f"cannot import {path}: not a Python module")
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # report an author's broken tools.py as a spec error, not a crash
        problems.add("tools.py", f"cannot import {path}: {type(exc).__name__}: {exc}")
        return None
    sys.modules[module_name] = module
    return module


def _load_tools(
    problems: _Problems, raw: Any, module: ModuleType | None, tools_path: Path, *, bind: bool = True
) -> dict[str, ToolSpec]:
    """The declared tools; with ``bind``, each with its function from ``module`` (checked against its schema)."""
    tools: dict[str, ToolSpec] = {}
    if not isinstance(raw, list) or not raw:
        problems.add("tools", "must be a non-empty list of tool definitions")
        return tools
    for i, body in enumerate(raw):
        field = f"tools[{i}]"
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            problems.add(field, "must be a mapping with a string name")
            continue
        name = body["name"]
        field = f"tools[{i}]({name})"
        for extra in sorted(set(body) - {"name", "description", "parameters", "read_only"}):
            problems.add(f"{field}.{extra}", "unknown field")
        if name in tools:
            problems.add(f"{field}.name", "duplicate tool name")
        description = body.get("description")
        if not isinstance(description, str) or not description.strip():
            problems.add(f"{field}.description", "must be a non-empty string")
        parameters = body.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            problems.add(f"{field}.parameters", "must be a JSON schema with type: object")
            parameters = {"type": "object"}
        else:
            try:
                Draft202012Validator.check_schema(parameters)
            except SchemaError as exc:
                problems.add(f"{field}.parameters", f"invalid JSON schema: {exc.message}")
        read_only = body.get("read_only", False)
        if not isinstance(read_only, bool):
            problems.add(f"{field}.read_only", "must be true or false")
        impl = getattr(module, name, None) if module is not None else None
        if not bind:
            pass
        elif impl is None or not callable(impl):
            problems.add(f"{field}.name", f"no function {name}() in {tools_path}")
        else:
            _check_signature(problems, impl, parameters, field)
        tools[name] = ToolSpec(name, description or "", parameters, bool(read_only), impl)
    return tools


def _check_signature(
    problems: _Problems, impl: Callable[..., Any], parameters: dict[str, Any], field: str
) -> None:
    params = list(inspect.signature(impl).parameters.values())
    accepted = {p.name for p in params[1:]}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    for name in parameters.get("properties", {}):
        if name not in accepted:
            problems.add(
                f"{field}.parameters.properties.{name}", f"{impl.__name__}() has no argument {name!r}"
            )


def load_domain(directory: str | Path) -> DomainSpec:
    """Load ``domain.yaml`` (+ ``tools.py``) from a domain folder; raises SpecError listing every problem."""
    directory = Path(directory)
    path = directory / "domain.yaml"
    raw = _read_yaml(path)
    problems = _Problems(path)
    if not isinstance(raw, dict):
        problems.add("(root)", "must be a mapping")
        problems.raise_if_any()
    for extra in sorted(set(raw) - {"name", "title", "policy", "tables", "tools", "data"}):
        problems.add(extra, "unknown field")
    name = raw.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        problems.add("name", "must be a non-empty string without '/'")
        name = directory.name
    policy = raw.get("policy")
    if not isinstance(policy, str) or not policy.strip():
        problems.add("policy", "must be a non-empty string (the agent's instructions)")
    tables = _load_tables(problems, raw.get("tables"))
    data = _check_rows(problems, tables, raw.get("data"), "data")
    tools_path = directory / "tools.py"
    _load_tools(problems, raw.get("tools"), None, tools_path, bind=False)
    # A domain whose declarations are already broken is never run: importing its tools.py would
    # execute an author's code for a domain that cannot be used anyway.
    problems.raise_if_any()
    module = _import_tools(problems, tools_path, name)
    tools = _load_tools(problems, raw.get("tools"), module, tools_path)
    problems.raise_if_any()
    return DomainSpec(
        name=name,
        title=str(raw.get("title") or name),
        policy=policy,
        tables=tables,
        tools=tools,
        base_data=data,
        source=str(path),
    )


def _validator(tool: ToolSpec) -> Draft202012Validator:
    return Draft202012Validator(tool.parameters)


def _load_golden(problems: _Problems, domain: DomainSpec, raw: Any, task_id: str) -> tuple[GoldenCall, ...]:
    calls = []
    if not isinstance(raw, list):
        problems.add("golden", "must be a list of {tool, arguments}", task_id)
        return ()
    for i, step in enumerate(raw):
        field = f"golden[{i}]"
        if not isinstance(step, dict) or not isinstance(step.get("tool"), str):
            problems.add(field, "must be a mapping with a tool name", task_id)
            continue
        for extra in sorted(set(step) - {"tool", "arguments"}):
            problems.add(f"{field}.{extra}", "unknown field", task_id)
        tool = domain.tools.get(step["tool"])
        arguments = step.get("arguments") or {}
        if tool is None:
            problems.add(f"{field}.tool", f"unknown tool {step['tool']!r}", task_id)
        elif not isinstance(arguments, dict):
            problems.add(f"{field}.arguments", "must be a mapping", task_id)
        else:
            error = best_match(_validator(tool).iter_errors(arguments))
            if error is not None:
                where = ".".join(str(p) for p in error.absolute_path)
                problems.add(f"{field}.arguments" + (f".{where}" if where else ""), error.message, task_id)
        calls.append(GoldenCall(step["tool"], dict(arguments) if isinstance(arguments, dict) else {}))
    return tuple(calls)


def _check_columns(problems: _Problems, spec: TableSpec, mapping: Any, field: str, task_id: str) -> None:
    if not isinstance(mapping, dict) or not mapping:
        problems.add(field, "must be a non-empty mapping of column -> value", task_id)
        return
    _check_row(problems, spec, mapping, field, task_id, full_key=False)


def _load_checks(problems: _Problems, domain: DomainSpec, raw: Any, task_id: str) -> tuple[CheckSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.add("checks", "must be a list", task_id)
        return ()
    checks = []
    for i, body in enumerate(raw):
        field = f"checks[{i}]"
        if not isinstance(body, dict) or body.get("kind") not in CHECK_KINDS:
            problems.add(f"{field}.kind", f"must be one of {', '.join(CHECK_KINDS)}", task_id)
            continue
        kind = body["kind"]
        params = {k: v for k, v in body.items() if k not in ("kind", "description", "forbidden")}
        for extra in sorted(set(params) - CHECK_FIELDS[kind]):
            problems.add(f"{field}.{extra}", f"unknown field for a {kind} check", task_id)
        for missing in sorted(CHECK_REQUIRED[kind] - set(params)):
            problems.add(f"{field}.{missing}", "required", task_id)
        table = domain.tables.get(params["table"]) if isinstance(params.get("table"), str) else None
        if "table" in CHECK_FIELDS[kind] and "table" in params and table is None:
            problems.add(f"{field}.table", f"unknown table {params['table']!r}", task_id)
        if table is not None:
            for name in ("key", "fields", "where"):
                if name in params:
                    _check_columns(problems, table, params[name], f"{field}.{name}", task_id)
            for j, exception in enumerate(params.get("except") or []):
                _check_columns(problems, table, exception, f"{field}.except[{j}]", task_id)
        if kind == "row_count" and (not isinstance(params.get("count"), int) or params.get("count", 0) < 0):
            problems.add(f"{field}.count", "must be a non-negative integer", task_id)
        forbidden = body.get("forbidden", False)
        if not isinstance(forbidden, bool):
            problems.add(f"{field}.forbidden", "must be true or false", task_id)
        checks.append(CheckSpec(kind, params, str(body.get("description") or ""), bool(forbidden)))
    return tuple(checks)


def _load_rubrics(
    problems: _Problems, raw: Any, task_id: str
) -> tuple[tuple[str, ...], dict[str, list[str]]]:
    """Rubrics are strings or {question, keywords}; keywords feed the offline KeywordJudge only."""
    if raw is None:
        return (), {}
    if not isinstance(raw, list):
        problems.add("rubrics", "must be a list", task_id)
        return (), {}
    questions, keywords = [], {}
    for i, item in enumerate(raw):
        if isinstance(item, str) and item.strip():
            questions.append(item)
        elif isinstance(item, dict) and isinstance(item.get("question"), str):
            words = item.get("keywords") or []
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                problems.add(f"rubrics[{i}].keywords", "must be a list of strings", task_id)
                words = []
            for extra in sorted(set(item) - {"question", "keywords"}):
                problems.add(f"rubrics[{i}].{extra}", "unknown field", task_id)
            questions.append(item["question"])
            keywords[item["question"]] = list(words)
        else:
            problems.add(f"rubrics[{i}]", "must be a question string or {question, keywords}", task_id)
    return tuple(questions), keywords


def _load_task(problems: _Problems, domain: DomainSpec, raw: Any, index: int, path: Path) -> TaskSpec | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw["id"].strip():
        problems.add(f"tasks[{index}].id", "every task needs a non-empty string id")
        return None
    local_id = raw["id"]
    task_id = f"{domain.name}/{local_id}"
    for extra in sorted(set(raw) - TASK_FIELDS):
        problems.add(extra, "unknown field", task_id)
    for name in ("query", "user_context"):
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            problems.add(name, "must be a non-empty string", task_id)
    tags = raw.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        problems.add("tags", "must be a list of strings", task_id)
        tags = []
    patch = _check_rows(problems, domain.tables, raw.get("data_patch"), "data_patch", task_id)
    golden = _load_golden(problems, domain, raw.get("golden"), task_id)
    checks = _load_checks(problems, domain, raw.get("checks"), task_id)
    rubrics, keywords = _load_rubrics(problems, raw.get("rubrics"), task_id)
    reply = raw.get("reply", "")
    if not isinstance(reply, str):
        problems.add("reply", "must be a string (the golden agent's final reply)", task_id)
        reply = ""
    extra = {"golden_reply": reply, "rubric_keywords": keywords, "local_id": local_id}
    return TaskSpec(
        id=task_id,
        domain=domain.name,
        query=str(raw.get("query") or ""),
        user_context=str(raw.get("user_context") or ""),
        data_patch=patch,
        golden=golden,
        checks=checks,
        rubrics=rubrics,
        tags=tuple(tags),
        title=str(raw.get("title") or local_id),
        source=f"{path}#{local_id}",
        extra=extra,
    )


def load_tasks(directory: str | Path, domain: DomainSpec) -> dict[str, TaskSpec]:
    """Load ``tasks.yaml`` of a domain folder; raises SpecError naming file, task id and field."""
    path = Path(directory) / "tasks.yaml"
    raw = _read_yaml(path)
    problems = _Problems(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("tasks"), list):
        problems.add("tasks", "the file must be a mapping with a 'tasks' list")
        problems.raise_if_any()
    for extra in sorted(set(raw) - {"tasks"}):
        problems.add(extra, "unknown field")
    tasks: dict[str, TaskSpec] = {}
    for index, body in enumerate(raw["tasks"]):
        task = _load_task(problems, domain, body, index, path)
        if task is None:
            continue
        if task.id in tasks:
            problems.add("id", "duplicate task id", task.id)
        tasks[task.id] = task
    problems.raise_if_any()
    return tasks


def suite_domain_dirs(directory: Path, raw: dict[str, Any], problems: _Problems) -> list[Path]:
    """Domain folders of a suite: the ``domains`` list, or every subfolder holding a domain.yaml."""
    listed = raw.get("domains")
    if listed is None:
        return sorted(p.parent for p in directory.glob("*/domain.yaml"))
    if not isinstance(listed, list) or not all(isinstance(d, str) for d in listed):
        problems.add("domains", "must be a list of domain folder names")
        return []
    for name in listed:
        if not (directory / name / "domain.yaml").is_file():
            problems.add("domains", f"no {directory / name / 'domain.yaml'}")
    return [directory / name for name in listed if (directory / name / "domain.yaml").is_file()]


def load_suite(directory: str | Path, *, skip_broken_domains: bool = False) -> SuiteSpec:
    """Load a suite folder; with ``skip_broken_domains`` a domain that fails to load is left out."""
    directory = Path(directory)
    path = directory / "suite.yaml"
    raw = _read_yaml(path)
    problems = _Problems(path)
    if not isinstance(raw, dict):
        problems.add("(root)", "must be a mapping")
        problems.raise_if_any()
    for extra in sorted(set(raw) - {"name", "version", "description", "domains", "evaluation_only"}):
        problems.add(extra, "unknown field")
    for name in ("name", "version"):
        if not isinstance(raw.get(name), (str, int, float)) or str(raw.get(name)).strip() == "":
            problems.add(name, "required")
    domains: dict[str, DomainSpec] = {}
    tasks: dict[str, TaskSpec] = {}
    errors = list(problems.errors)
    for domain_dir in suite_domain_dirs(directory, raw, problems):
        try:
            domain = load_domain(domain_dir)
            domain_tasks = load_tasks(domain_dir, domain)
        except SpecError as exc:
            if not skip_broken_domains:
                errors.extend(exc.errors)
            continue
        if domain.name in domains:
            errors.append(f"{domain.source}: name: domain {domain.name!r} is defined twice")
        domains[domain.name] = domain
        tasks.update(domain_tasks)
    errors.extend(e for e in problems.errors if e not in errors)
    if errors:
        raise SpecError(errors)
    return SuiteSpec(
        name=str(raw["name"]),
        version=str(raw["version"]),
        domains=domains,
        tasks=tasks,
        evaluation_only=bool(raw.get("evaluation_only", False)),
        description=str(raw.get("description") or ""),
    )


@functools.lru_cache(maxsize=8)
def load_builtin_suite(name: str = "starter", *, skip_broken_domains: bool = False) -> SuiteSpec:
    """A built-in suite from tb_engine/suites/<name> (cached per process: specs are immutable)."""
    return load_suite(SUITES_DIR / name, skip_broken_domains=skip_broken_domains)
