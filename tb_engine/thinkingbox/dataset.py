"""ThinkingBox-Bench dataset -> our SuiteSpec / DomainSpec / TaskSpec.

Scenario YAML (``scenario/<name>.yaml``) becomes a DomainSpec served over MCP; each
``def test_…`` in ``test_case/**/*.py`` becomes a TaskSpec with id ``<file name>:<function>``.
Test files are parsed with ``ast`` and their ``\"\"\"!`` docstrings with YAML: never imported.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

import yaml

from tb_engine.spec import CheckSpec, DomainSpec, GoldenCall, SuiteSpec, TaskSpec, ToolSpec
from tb_engine.thinkingbox.check_classifier import RUBRICS_YESNO, classify_helpers, classify_test_body
from tb_engine.thinkingbox.errors import ImportProblem, ThinkingBoxFormatError

# libyaml's loader is ~10x faster on the 700 KB test files; same results as SafeLoader.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SUITE_NAME = "thinkingbox-bench"
_ANY_OBJECT: dict[str, Any] = {"type": "object"}  # real schemas arrive from list_tools at run time


def _load_yaml(text: str, *, file: Path | str, first_line: int = 1, test: str = "") -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problem = getattr(exc, "problem", None) or str(exc)
        raise ThinkingBoxFormatError(f"malformed YAML: {problem}", file=file, line=line, test=test) from exc


def _require(
    data: Any, key: str, kind: type, *, file: Path | str, test: str = "", line: int | None = None
) -> Any:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, kind):
        raise ThinkingBoxFormatError(
            f"field {key!r} must be a {kind.__name__}, got {type(value).__name__}",
            file=file,
            line=line,
            test=test,
        )
    return value


def parse_scenario(path: str | Path, tools_listing: str | Path | None = None) -> DomainSpec:
    """Read one scenario YAML into a DomainSpec (backend "mcp", server name = scenario name)."""
    path = Path(path)
    name = path.stem
    data = _load_yaml(path.read_text(encoding="utf-8"), file=path)
    if not isinstance(data, dict):
        raise ThinkingBoxFormatError("scenario must be a YAML mapping", file=path)
    world_state = _require(data, "world_state", dict, file=path)
    if name not in world_state:
        raise ThinkingBoxFormatError(f"world_state has no entry for server {name!r}", file=path)
    server_state = world_state[name] or {}
    policy = data.get("bot_instructions") or ""
    if not isinstance(policy, str):
        raise ThinkingBoxFormatError("field 'bot_instructions' must be text", file=path)
    tool_entries = _require(data, "tools", list, file=path)
    schemas = _listed_schemas(tools_listing) if tools_listing else {}
    tools: dict[str, ToolSpec] = {}
    for position, entry in enumerate(tool_entries):
        tool_name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(tool_name, str):
            raise ThinkingBoxFormatError(f"tools[{position}] has no name", file=path)
        listed = schemas.get(tool_name, {})
        annotations = listed.get("annotations") or {}
        tools[tool_name] = ToolSpec(
            name=tool_name,
            description=listed.get("description") or "",
            parameters=listed.get("inputSchema") or dict(_ANY_OBJECT),
            read_only=bool(annotations.get("readOnlyHint", False)),
        )
    sources = [s.get("name", "") for s in server_state.get("sources") or [] if isinstance(s, dict)]
    return DomainSpec(
        name=name,
        title=name.replace("_", " "),
        policy=policy,
        tables={},  # discovered from the server's state at run time (see effects.py)
        tools=tools,
        base_data=dict(server_state.get("data_patch") or {}),
        backend="mcp",
        mcp={"server": name, "world_state": server_state, "policy_sources": sources},
        source=str(path),
    )


def _listed_schemas(path: str | Path) -> dict[str, dict[str, Any]]:
    data = _load_yaml(Path(path).read_text(encoding="utf-8"), file=path)  # JSON is YAML
    tools = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(tools, list):
        raise ThinkingBoxFormatError("tools listing must hold a list of tools", file=path)
    return {t["name"]: t for t in tools if isinstance(t, dict) and "name" in t}


def _docstring_yaml(node: ast.AST, *, file: Path, test: str = "") -> tuple[Any, int] | None:
    """The YAML of a ``\"\"\"!`` docstring node and the line it starts on, or None."""
    if not (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return None
    text = node.value.value
    if not text.startswith("!"):
        return None
    return _load_yaml(text[1:], file=file, first_line=node.lineno, test=test), node.lineno


def parse_test_file(path: str | Path, scenarios: dict[str, DomainSpec] | None = None) -> list[TaskSpec]:
    """Read one ThinkingBox test-case file (never executed) into TaskSpecs."""
    path = Path(path)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise ThinkingBoxFormatError(f"not valid Python: {exc.msg}", file=path, line=exc.lineno) from exc
    header = next((h for h in (_docstring_yaml(n, file=path) for n in tree.body) if h is not None), None)
    if header is None or not isinstance(header[0], dict) or not isinstance(header[0].get("scenario"), str):
        raise ThinkingBoxFormatError('no module docstring """! with a "scenario:" name', file=path, line=1)
    scenario = header[0]["scenario"]
    if scenarios is not None and scenario not in scenarios:
        raise ThinkingBoxFormatError(f"unknown scenario {scenario!r}", file=path, line=header[1])
    helpers = classify_helpers(tree, scenario)
    tasks: list[TaskSpec] = []
    seen: dict[str, int] = {}
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test")):
            continue
        if node.name in seen:
            raise ThinkingBoxFormatError(
                f"duplicate test id (first defined on line {seen[node.name]})",
                file=path,
                line=node.lineno,
                test=node.name,
            )
        seen[node.name] = node.lineno
        tasks.append(_parse_test(node, path=path, scenario=scenario, helpers=helpers, scenarios=scenarios))
    return tasks


def _parse_test(
    node: ast.FunctionDef,
    *,
    path: Path,
    scenario: str,
    helpers: dict[str, str],
    scenarios: dict[str, DomainSpec] | None,
) -> TaskSpec:
    test = node.name
    parsed = _docstring_yaml(node.body[0], file=path, test=test) if node.body else None
    if parsed is None or not isinstance(parsed[0], dict):
        raise ThinkingBoxFormatError(
            'test has no """! YAML docstring mapping', file=path, line=node.lineno, test=test
        )
    doc, line = parsed
    query = _require(doc, "query", str, file=path, test=test, line=line)
    user_context = doc.get("user_context") or ""
    init = _require(doc, "init", dict, file=path, test=test, line=line)
    if scenario not in init or len(init) != 1:
        raise ThinkingBoxFormatError(
            f"init must hold exactly the scenario server {scenario!r}, got {sorted(init)}",
            file=path,
            line=line,
            test=test,
        )
    server_init = init[scenario] or {}
    data_patch = server_init.get("data_patch") or {}
    if not isinstance(data_patch, dict):
        raise ThinkingBoxFormatError(
            f"init.{scenario}.data_patch must be a mapping", file=path, line=line, test=test
        )
    golden = _golden_calls(server_init, file=path, test=test, line=line, scenario=scenario)
    if scenarios is not None:
        known = scenarios[scenario].tools
        unknown = sorted({c.tool for c in golden} - set(known))
        if unknown:
            raise ThinkingBoxFormatError(
                f"golden trajectory calls unknown tools {unknown}", file=path, line=line, test=test
            )
    verdict = classify_test_body(node, helpers)
    rubrics = tuple(server_init.get("rubrics_yesno") or ())
    checks: tuple[CheckSpec, ...] = ()
    if not verdict.standard:
        body_source = "\n".join(ast.unparse(s) for s in node.body[1:])
        checks = (
            CheckSpec(
                kind="custom_unsupported",
                params={"reason": verdict.reason, "body": body_source},
                description="ThinkingBox test body is not a standard state check; not graded automatically",
            ),
        )
    graded_rubrics = rubrics if RUBRICS_YESNO in verdict.kinds or not verdict.standard else ()
    return TaskSpec(
        id=f"{path.name}:{test}",
        domain=scenario,
        query=query,
        user_context=str(user_context),
        data_patch=data_patch,
        golden=golden,
        checks=checks,
        rubrics=graded_rubrics,
        tags=("thinkingbox", scenario),
        title=test,
        source=f"{path}:{node.lineno}",
        extra={
            "test_file": path.name,
            "test_name": test,
            "line": node.lineno,
            "init": copy.deepcopy(server_init),
            "ungraded_rubrics": list(rubrics) if rubrics and not graded_rubrics else [],
        },
    )


def _golden_calls(
    server_init: dict, *, file: Path, test: str, line: int, scenario: str
) -> tuple[GoldenCall, ...]:
    golden_case = server_init.get("golden_test_case") or {}
    interactions = golden_case.get("tool_interactions") if isinstance(golden_case, dict) else None
    if not isinstance(interactions, list):
        raise ThinkingBoxFormatError(
            f"init.{scenario}.golden_test_case.tool_interactions must be a list",
            file=file,
            line=line,
            test=test,
        )
    calls = []
    for position, step in enumerate(interactions):
        if not isinstance(step, dict) or not isinstance(step.get("tool"), str):
            raise ThinkingBoxFormatError(
                f"tool_interactions[{position}] has no tool name", file=file, line=line, test=test
            )
        arguments = step.get("parameters") or {}
        if not isinstance(arguments, dict):
            raise ThinkingBoxFormatError(
                f"tool_interactions[{position}].parameters must be a mapping", file=file, line=line, test=test
            )
        calls.append(GoldenCall(tool=step["tool"], arguments=arguments))
    return tuple(calls)


def init_config(domain: DomainSpec, task: TaskSpec) -> dict[str, Any]:
    """The ``__reserved__init`` config: scenario world_state.<server> overlaid with the task's init.<server>."""
    base = copy.deepcopy((domain.mcp or {}).get("world_state") or {})
    overlay = copy.deepcopy(task.extra.get("init") or {})
    merged = {**base, **dict(overlay.items())}
    # Table lists from the scenario survive unless the task patches the same table.
    if isinstance(base.get("data_patch"), dict) and isinstance(overlay.get("data_patch"), dict):
        merged["data_patch"] = {**base["data_patch"], **overlay["data_patch"]}
    return merged


def read_test_list(path: str | Path) -> list[str]:
    """A ThinkingBox test list (YAML list of ``file.py:test_name``) in its order."""
    data = _load_yaml(Path(path).read_text(encoding="utf-8"), file=path)
    if not isinstance(data, list) or not all(isinstance(x, str) and ":" in x for x in data):
        raise ThinkingBoxFormatError(
            "test list must be a YAML list of 'file.py:test_name' strings", file=path
        )
    return data


def parse_dataset(
    directory: str | Path,
    test_list: str | Path | None = None,
    *,
    version: str = "v1.0",
    tools_dir: str | Path | None = None,
) -> tuple[SuiteSpec, list[ImportProblem]]:
    """Read a dataset folder (scenario/ + test_case/) into an evaluation-only suite plus non-fatal problems."""
    directory = Path(directory)
    scenario_dir, case_dir = directory / "scenario", directory / "test_case"
    if not scenario_dir.is_dir() or not case_dir.is_dir():
        raise ThinkingBoxFormatError("dataset folder needs scenario/ and test_case/", file=directory)
    domains: dict[str, DomainSpec] = {}
    for scenario_file in sorted(scenario_dir.glob("*.yaml")):
        listing = Path(tools_dir) / f"tools_{scenario_file.stem}.json" if tools_dir else None
        domains[scenario_file.stem] = parse_scenario(
            scenario_file, listing if listing and listing.exists() else None
        )
    tasks: dict[str, TaskSpec] = {}
    problems: list[ImportProblem] = []
    for test_file in sorted(case_dir.rglob("*.py")):
        for task in parse_test_file(test_file, domains):
            if task.id in tasks:
                raise ThinkingBoxFormatError(
                    f"duplicate task id {task.id!r} (also in {tasks[task.id].source})",
                    file=test_file,
                    line=task.extra["line"],
                    test=task.extra["test_name"],
                )
            tasks[task.id] = task
    if test_list is not None:
        tasks = _select(tasks, read_test_list(test_list), str(test_list), problems)
    for task in tasks.values():
        if any(c.kind == "custom_unsupported" for c in task.checks):
            problems.append(
                ImportProblem(task.source, "custom test body: imported but not graded automatically", task.id)
            )
        if task.extra.get("ungraded_rubrics"):
            problems.append(
                ImportProblem(
                    task.source, "rubrics_yesno present but the test body never checks them", task.id
                )
            )
    used = {t.domain for t in tasks.values()}
    suite = SuiteSpec(
        name=SUITE_NAME,
        version=version,
        domains={name: d for name, d in domains.items() if name in used},
        tasks=tasks,
        evaluation_only=True,  # ThinkingBox-Bench licence: evaluation only, never training
        description=f"ThinkingBox-Bench imported from {directory}",
    )
    return suite, problems


def _select(
    tasks: dict[str, TaskSpec], wanted: list[str], list_file: str, problems: list[ImportProblem]
) -> dict[str, TaskSpec]:
    selected: dict[str, TaskSpec] = {}
    for position, task_id in enumerate(wanted):
        if task_id in selected:
            problems.append(ImportProblem(list_file, f"listed twice: {task_id}", line=position + 1))
        elif task_id not in tasks:
            problems.append(
                ImportProblem(
                    list_file, f"listed task not found in the dataset: {task_id}", line=position + 1
                )
            )
        else:
            selected[task_id] = tasks[task_id]
    return selected
