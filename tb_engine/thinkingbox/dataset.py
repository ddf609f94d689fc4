"""ThinkingBox-Bench dataset -> our SuiteSpec / DomainSpec / TaskSpec.

Scenario YAML (``scenario/<name>.yaml``) becomes a DomainSpec served over MCP: the domain is
named after the scenario (what test files name in ``scenario:``), the server after the one key
of its ``world_state`` (``airline_tau_bench_full.yaml`` -> server ``airline_tau_bench``). Each
``def test_…`` in ``test_case/**/*.py`` becomes a TaskSpec with id ``<file name>:<function>``.
Test files are parsed with ``ast`` and their ``\"\"\"!`` docstrings with YAML: never imported.
With a test list only the listed tests are read; the others are skipped and counted.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tb_engine.spec import CheckSpec, DomainSpec, GoldenCall, SuiteSpec, TaskSpec, ToolSpec
from tb_engine.textfile import NotText, read_text
from tb_engine.thinkingbox.check_classifier import RUBRICS_YESNO, classify_helpers, classify_test_body
from tb_engine.thinkingbox.errors import ImportProblem, ThinkingBoxFormatError
from tb_engine.yaml_bounded import load_yaml

SUITE_NAME = "thinkingbox-bench"
_ANY_OBJECT: dict[str, Any] = {"type": "object"}  # real schemas arrive from list_tools at run time


def _read(path: Path | str, what: str) -> str:
    """The file's text; a binary or non-UTF-8 file is a ThinkingBoxFormatError naming its line."""
    try:
        return read_text(path, what)
    except NotText as exc:
        raise ThinkingBoxFormatError(exc.message, file=path, line=exc.line) from exc


def _load_yaml(text: str, *, file: Path | str, first_line: int = 1, test: str = "") -> Any:
    try:
        return load_yaml(text)  # libyaml, safe, alias expansion bounded
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


class UnsupportedScenario(ThinkingBoxFormatError):
    """A well-formed scenario we cannot run: its world_state names no server or more than one."""

    def __init__(self, message: str, *, file: str | Path, servers: list[str]):
        super().__init__(message, file=file)
        self.servers = servers


def scenario_server(path: str | Path, world_state: dict[str, Any]) -> str:
    """The one server a scenario's ``world_state`` names (UnsupportedScenario when not exactly one).

    An attempt talks to one MCP server process, so a scenario naming several servers
    (``retail_banking_email.yaml``: ``online_banking`` + ``email_system``) is not supported.
    """
    servers = [str(name) for name in world_state]
    if len(servers) != 1:
        what = "no server" if not servers else f"{len(servers)} servers ({', '.join(servers)})"
        raise UnsupportedScenario(
            f"world_state names {what}; an attempt talks to exactly one MCP server",
            file=path,
            servers=servers,
        )
    return servers[0]


def parse_scenario(
    path: str | Path, tools_listing: str | Path | None = None, *, tools_dir: str | Path | None = None
) -> DomainSpec:
    """Read one scenario YAML into a DomainSpec (backend "mcp", named after the scenario file).

    ``mcp["server"]`` is the one server under ``world_state`` (not always the file name). Tool
    schemas come from ``tools_listing``, else from ``tools_dir/tools_<server>.json`` when present.
    Raises UnsupportedScenario for a scenario naming no server or several.
    """
    path = Path(path)
    name = path.stem
    data = _load_yaml(_read(path, "YAML"), file=path)
    if not isinstance(data, dict):
        raise ThinkingBoxFormatError("scenario must be a YAML mapping", file=path)
    world_state = _require(data, "world_state", dict, file=path)
    server = scenario_server(path, world_state)
    server_state = world_state[server] or {}
    if not isinstance(server_state, dict):
        raise ThinkingBoxFormatError(f"world_state.{server} must be a mapping", file=path)
    policy = data.get("bot_instructions") or ""
    if not isinstance(policy, str):
        raise ThinkingBoxFormatError("field 'bot_instructions' must be text", file=path)
    tool_entries = _require(data, "tools", list, file=path)
    if tools_listing is None and tools_dir is not None:
        candidates = (Path(tools_dir) / f"tools_{n}.json" for n in (server, name))
        tools_listing = next((c for c in candidates if c.exists()), None)
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
        mcp={"server": server, "world_state": server_state, "policy_sources": sources},
        source=str(path),
    )


def _listed_schemas(path: str | Path) -> dict[str, dict[str, Any]]:
    data = _load_yaml(_read(path, "JSON"), file=path)  # JSON is YAML
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


def _read_test_module(path: Path) -> tuple[ast.Module, str, int]:
    """A test file's syntax tree, the scenario its ``\"\"\"!`` module docstring names, and that line."""
    try:
        tree = ast.parse(_read(path, "Python"), filename=str(path))
    except SyntaxError as exc:
        raise ThinkingBoxFormatError(f"not valid Python: {exc.msg}", file=path, line=exc.lineno) from exc
    header = next((h for h in (_docstring_yaml(n, file=path) for n in tree.body) if h is not None), None)
    if header is None or not isinstance(header[0], dict) or not isinstance(header[0].get("scenario"), str):
        raise ThinkingBoxFormatError('no module docstring """! with a "scenario:" name', file=path, line=1)
    return tree, header[0]["scenario"], header[1]


def _test_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]


def parse_test_file(
    path: str | Path,
    scenarios: dict[str, DomainSpec] | None = None,
    *,
    only: set[str] | None = None,
) -> list[TaskSpec]:
    """Read one ThinkingBox test-case file (never executed) into TaskSpecs.

    ``only``: the function names to read (a test list's); the others are not parsed at all.
    """
    path = Path(path)
    tree, scenario, header_line = _read_test_module(path)
    if scenarios is not None and scenario not in scenarios:
        raise ThinkingBoxFormatError(f"unknown scenario {scenario!r}", file=path, line=header_line)
    server = ((scenarios[scenario].mcp or {}).get("server") if scenarios else None) or scenario
    helpers = classify_helpers(tree, server)
    tasks: list[TaskSpec] = []
    seen: dict[str, int] = {}
    for node in _test_functions(tree):
        wanted = only is None or node.name in only
        if node.name in seen and wanted:
            raise ThinkingBoxFormatError(
                f"duplicate test id (first defined on line {seen[node.name]})",
                file=path,
                line=node.lineno,
                test=node.name,
            )
        seen.setdefault(node.name, node.lineno)
        if wanted:
            tasks.append(
                _parse_test(
                    node, path=path, scenario=scenario, server=server, helpers=helpers, scenarios=scenarios
                )
            )
    return tasks


def _parse_test(
    node: ast.FunctionDef,
    *,
    path: Path,
    scenario: str,
    server: str,
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
    # Optional, but when present it is text: the same check as a required field's.
    user_context = (
        _require(doc, "user_context", str, file=path, test=test, line=line) if doc.get("user_context") else ""
    )
    # Tests of the non-benchmark scenarios have no init: they start from the scenario's state.
    init = doc.get("init") if doc.get("init") is not None else {}
    if not isinstance(init, dict):
        raise ThinkingBoxFormatError(
            f"field 'init' must be a dict, got {type(init).__name__}", file=path, line=line, test=test
        )
    if set(init) - {server}:
        raise ThinkingBoxFormatError(
            f"init may only hold the scenario's server {server!r}, got {sorted(init)}",
            file=path,
            line=line,
            test=test,
        )
    server_init = init.get(server) or {}
    if not isinstance(server_init, dict):
        raise ThinkingBoxFormatError(
            f"field init.{server} must be a mapping, got {type(server_init).__name__}",
            file=path,
            line=line,
            test=test,
        )
    data_patch = server_init.get("data_patch") or {}
    if not isinstance(data_patch, dict):
        raise ThinkingBoxFormatError(
            f"init.{server}.data_patch must be a mapping", file=path, line=line, test=test
        )
    golden = _golden_calls(server_init, file=path, test=test, line=line, server=server)
    if scenarios is not None:
        known = scenarios[scenario].tools
        unknown = sorted({c.tool for c in golden} - set(known))
        if unknown:
            raise ThinkingBoxFormatError(
                f"golden trajectory calls unknown tools {unknown}", file=path, line=line, test=test
            )
    verdict = classify_test_body(node, helpers)
    rubrics = _rubrics(server_init, file=path, test=test, line=line, server=server)
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


def _rubrics(server_init: dict, *, file: Path, test: str, line: int, server: str) -> tuple[str, ...]:
    """``init.<server>.rubrics_yesno``: a list of yes/no questions (strings)."""
    raw = server_init.get("rubrics_yesno") or []
    where = f"init.{server}.rubrics_yesno"
    if not isinstance(raw, list):
        raise ThinkingBoxFormatError(
            f"field {where} must be a list of strings, got {type(raw).__name__}",
            file=file,
            line=line,
            test=test,
        )
    for position, question in enumerate(raw):
        if not isinstance(question, str):
            raise ThinkingBoxFormatError(
                f"field {where}[{position}] must be a string, got {type(question).__name__}",
                file=file,
                line=line,
                test=test,
            )
    return tuple(raw)


def _golden_calls(
    server_init: dict, *, file: Path, test: str, line: int, server: str
) -> tuple[GoldenCall, ...]:
    if server_init.get("golden_test_case") is None:
        return ()  # no golden trajectory (the non-benchmark tests): the golden state is S0
    golden_case = server_init["golden_test_case"]
    interactions = golden_case.get("tool_interactions") if isinstance(golden_case, dict) else None
    if not isinstance(interactions, list):
        raise ThinkingBoxFormatError(
            f"init.{server}.golden_test_case.tool_interactions must be a list",
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
    data = _load_yaml(_read(path, "YAML"), file=path)
    if not isinstance(data, list) or not all(isinstance(x, str) and ":" in x for x in data):
        raise ThinkingBoxFormatError(
            "test list must be a YAML list of 'file.py:test_name' strings", file=path
        )
    return data


@dataclass
class DatasetRead:
    """A dataset folder read into a suite, with what was left out and why."""

    suite: SuiteSpec
    problems: list[ImportProblem]
    skipped: dict[str, int] = field(default_factory=dict)  # test file name -> tests not in the test list
    left_out: dict[str, list[str]] = field(default_factory=dict)  # scenario -> its tests not imported

    @property
    def skipped_count(self) -> int:
        return sum(self.skipped.values())


def parse_dataset(
    directory: str | Path,
    test_list: str | Path | None = None,
    *,
    version: str = "v1.0",
    tools_dir: str | Path | None = None,
) -> tuple[SuiteSpec, list[ImportProblem]]:
    """Read a dataset folder (scenario/ + test_case/) into an evaluation-only suite plus non-fatal problems."""
    read = read_dataset(directory, test_list, version=version, tools_dir=tools_dir)
    return read.suite, read.problems


class _Scenarios:
    """Scenario files by name, parsed on first use (a scenario no read test uses is never parsed)."""

    def __init__(self, scenario_dir: Path, tools_dir: str | Path | None) -> None:
        self.files = {path.stem: path for path in sorted(scenario_dir.glob("*.yaml"))}
        self.tools_dir = tools_dir
        self.domains: dict[str, DomainSpec] = {}
        self.unsupported: dict[str, UnsupportedScenario] = {}

    def load(self, name: str) -> DomainSpec | None:
        """The domain, or None when the scenario is unsupported (kept in ``unsupported``)."""
        if name not in self.domains and name not in self.unsupported:
            try:
                self.domains[name] = parse_scenario(self.files[name], tools_dir=self.tools_dir)
            except UnsupportedScenario as exc:
                self.unsupported[name] = exc
        return self.domains.get(name)


def read_dataset(
    directory: str | Path,
    test_list: str | Path | None = None,
    *,
    version: str = "v1.0",
    tools_dir: str | Path | None = None,
) -> DatasetRead:
    """Read a dataset folder as shipped into an evaluation-only suite.

    Without a test list every test is read (and every scenario). With one, only the listed tests
    are read: the others are skipped and counted per file, and a scenario no listed test uses is
    never parsed. Not fatal, reported in ``problems``: a listed test whose file or function is
    missing, a test listed twice, a scenario that names no server or several (its tests are left
    out), custom test bodies and unchecked rubrics. Fatal (ThinkingBoxFormatError): malformed
    YAML or Python in a file that is read, an unknown scenario, duplicate ids, wrong types.
    """
    directory = Path(directory)
    scenario_dir, case_dir = directory / "scenario", directory / "test_case"
    if not scenario_dir.is_dir() or not case_dir.is_dir():
        raise ThinkingBoxFormatError("dataset folder needs scenario/ and test_case/", file=directory)
    scenarios = _Scenarios(scenario_dir, tools_dir)
    wanted = read_test_list(test_list) if test_list is not None else None
    listed: dict[str, set[str]] | None = None
    if wanted is not None:
        listed = {}
        for task_id in wanted:
            file_name, _, test_name = task_id.partition(":")
            listed.setdefault(file_name, set()).add(test_name)
    read = DatasetRead(suite=SuiteSpec(name=SUITE_NAME, version=version, domains={}, tasks={}), problems=[])
    tasks: dict[str, TaskSpec] = {}
    test_files = sorted(case_dir.rglob("*.py"))
    for test_file in test_files:
        names = None if listed is None else listed.get(test_file.name)
        if listed is not None and names is None:
            count = _count_tests(test_file, read)
            if count is not None:
                read.skipped[test_file.name] = read.skipped.get(test_file.name, 0) + count
            continue
        tree, scenario, header_line = _read_test_module(test_file)
        if scenario not in scenarios.files:
            raise ThinkingBoxFormatError(f"unknown scenario {scenario!r}", file=test_file, line=header_line)
        functions = [n.name for n in _test_functions(tree)]
        if names is not None:
            skipped = sum(1 for n in functions if n not in names)
            if skipped:
                read.skipped[test_file.name] = read.skipped.get(test_file.name, 0) + skipped
        if scenarios.load(scenario) is None:
            read.left_out.setdefault(scenario, []).extend(
                f"{test_file.name}:{n}" for n in functions if names is None or n in names
            )
            continue
        for task in parse_test_file(test_file, scenarios.domains, only=names):
            if task.id in tasks:
                raise ThinkingBoxFormatError(
                    f"duplicate task id {task.id!r} (also in {tasks[task.id].source})",
                    file=test_file,
                    line=task.extra["line"],
                    test=task.extra["test_name"],
                )
            tasks[task.id] = task
    if listed is None:  # no list: every scenario is part of the dataset, so every one is read
        for name in scenarios.files:
            scenarios.load(name)
    for name, error in sorted(scenarios.unsupported.items()):
        left_out = read.left_out.get(name, [])
        read.problems.append(
            ImportProblem(
                error.file, f"scenario {name}: {error.message}; its {len(left_out)} test(s) are not imported"
            )
        )
    if wanted is not None:
        left_out_ids = {task_id for ids in read.left_out.values() for task_id in ids}
        present = {path.name for path in test_files}
        tasks = _select(tasks, wanted, str(test_list), read.problems, present, left_out_ids)
    for task in tasks.values():
        if any(c.kind == "custom_unsupported" for c in task.checks):
            read.problems.append(
                ImportProblem(task.source, "custom test body: imported but not graded automatically", task.id)
            )
        if task.extra.get("ungraded_rubrics"):
            read.problems.append(
                ImportProblem(
                    task.source, "rubrics_yesno present but the test body never checks them", task.id
                )
            )
    used = {t.domain for t in tasks.values()}
    read.suite = SuiteSpec(
        name=SUITE_NAME,
        version=version,
        domains={name: d for name, d in scenarios.domains.items() if name in used},
        tasks=tasks,
        evaluation_only=True,  # ThinkingBox-Bench licence: evaluation only, never training
        description=f"ThinkingBox-Bench imported from {directory}",
    )
    return read


def _count_tests(path: Path, read: DatasetRead) -> int | None:
    """How many ``def test_…`` a file not in the test list holds (it is not read further)."""
    try:
        return len(_test_functions(ast.parse(read_text(path, "Python"), filename=str(path))))
    except (SyntaxError, ValueError):  # NotText is a ValueError
        read.problems.append(
            ImportProblem(str(path), "not in the test list and not valid Python: not counted")
        )
        return None


def _select(
    tasks: dict[str, TaskSpec],
    wanted: list[str],
    list_file: str,
    problems: list[ImportProblem],
    present_files: set[str],
    left_out: set[str],
) -> dict[str, TaskSpec]:
    selected: dict[str, TaskSpec] = {}
    seen: set[str] = set()
    for position, task_id in enumerate(wanted):
        line = position + 1
        if task_id in seen:
            problems.append(ImportProblem(list_file, f"listed twice: {task_id}", line=line))
        elif task_id in tasks:
            selected[task_id] = tasks[task_id]
        elif task_id in left_out:
            pass  # its scenario's problem says why, once
        elif task_id.partition(":")[0] not in present_files:
            problems.append(
                ImportProblem(list_file, f"listed test's file is not in the dataset: {task_id}", line=line)
            )
        else:
            problems.append(
                ImportProblem(list_file, f"listed task not found in the dataset: {task_id}", line=line)
            )
        seen.add(task_id)
    return selected
