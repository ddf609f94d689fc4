"""Malformed inputs to the three importers end in one clear error, never a traceback, and write nothing.

The importers: a ThinkingBox dataset (``import_thinkingbox``, tb_engine.thinkingbox.dataset),
``tb infer`` results (``import_tb_results``, tb_engine.thinkingbox.results) and our own suite
folders (``load_suite``, tb_engine.loader). Each case is a small file built in tmp_path from a
valid example with one defect. Each is checked twice: the engine parser raises the importer's
error type (ThinkingBoxFormatError, SpecError) with exactly the expected text (file, line where
the parser knows it, test, field), and the management command, run as from the shell, exits
with status 1, prints that text on stderr, raises nothing and leaves every table as it was.
A NUL inside a string is not an error: it is stored shown as ␀ (PostgreSQL refuses NUL).
"""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from django.core.management import execute_from_command_line
from django.db import connections

from apps.attempts.models import Attempt
from apps.suites.models import Task
from tb_engine import loader
from tb_engine.loader import SpecError, load_suite
from tb_engine.thinkingbox import ThinkingBoxFormatError, parse_tb_results, read_dataset
from tests.thinkingbox.conftest import SHARED, table_counts, write_dataset

ROWS = SHARED / "tb_infer/append_r6.jsonl"
UID = "cloud_drive.py:test_append_some_more_text"
STARTER = Path(loader.SUITES_DIR) / "starter"
BINARY = bytes(range(256)) * 2  # NUL, every control byte and bytes that are never UTF-8
TEST_LINE = 16  # the line of the test's """! docstring in shop.py (after conftest's HEADER)


# --- the three valid examples, each with one defect -------------------------------------------------


def _tb_test(doc: str) -> str:
    """One ThinkingBox test function whose docstring YAML is ``doc``."""
    return (
        '\ndef test_one(x: TestContext, judge: Judge):\n    """!\n'
        + textwrap.indent(textwrap.dedent(doc), "    ")
        + '    """\n\n    validate_database(x)\n'
    )


VALID_DOC = """\
query: Please close my ticket.
user_context: You are Alex Kim.
init:
  tb_test_shop:
    data_patch: {}
    rubrics_yesno: ["Is the ticket closed?"]
    golden_test_case:
      tool_interactions:
        - tool: update_ticket
          parameters: {ticket_id: "2", status: solved}
"""


def _dataset(doc: str = VALID_DOC) -> Callable[[Path], tuple[Path, Path]]:
    """A dataset whose one test has docstring ``doc``; the file named in errors is shop.py."""

    def build(tmp_path: Path) -> tuple[Path, Path]:
        folder = write_dataset(tmp_path / "dataset", [_tb_test(doc)])
        return folder, folder / "test_case/tb_test_shop/shop.py"

    return build


def _dataset_file(which: str, content: bytes) -> Callable[[Path], tuple[Path, Path]]:
    """A valid dataset with its scenario or test file replaced by ``content``."""

    def build(tmp_path: Path) -> tuple[Path, Path]:
        folder, shop = _dataset()(tmp_path)
        target = shop if which == "test" else folder / "scenario/tb_test_shop.yaml"
        target.write_bytes(content)
        return folder, target

    return build


def _real_rows() -> list[dict]:
    return [json.loads(line) for line in ROWS.read_text().splitlines()[:2]]


def _results(mangle: Callable[[dict], object]) -> Callable[[Path], tuple[Path, Path]]:
    """Two real tb infer rows; ``mangle`` breaks the second (line 2) in place."""

    def build(tmp_path: Path) -> tuple[Path, Path]:
        rows = _real_rows()
        mangle(rows[1])
        path = tmp_path / "rows.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return path, path

    return build


def _results_file(content: bytes, name: str = "rows.jsonl") -> Callable[[Path], tuple[Path, Path]]:
    def build(tmp_path: Path) -> tuple[Path, Path]:
        path = tmp_path / name
        path.write_bytes(content)
        return path, path

    return build


def _valid_tasks() -> dict:
    """The first task of the starter suite's retail domain."""
    raw = yaml.safe_load((STARTER / "retail/tasks.yaml").read_text())
    return {"tasks": [raw["tasks"][0]]}


def _suite_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "suite"
    (folder / "retail").mkdir(parents=True)
    (folder / "suite.yaml").write_text('name: malformed-test\nversion: "1"\n')
    for name in ("domain.yaml", "tools.py"):
        shutil.copy(STARTER / "retail" / name, folder / "retail" / name)
    return folder


def _suite(mangle: Callable[[dict], object]) -> Callable[[Path], tuple[Path, Path]]:
    """A one-domain suite (starter's retail) whose tasks.yaml holds one task, broken by ``mangle``."""

    def build(tmp_path: Path) -> tuple[Path, Path]:
        folder = _suite_folder(tmp_path)
        tasks = _valid_tasks()
        mangle(tasks)
        (folder / "retail/tasks.yaml").write_text(yaml.safe_dump(tasks, sort_keys=False))
        return folder, folder / "retail/tasks.yaml"

    return build


def _suite_file(content: bytes) -> Callable[[Path], tuple[Path, Path]]:
    def build(tmp_path: Path) -> tuple[Path, Path]:
        folder = _suite_folder(tmp_path)
        (folder / "retail/tasks.yaml").write_bytes(content)
        return folder, folder / "retail/tasks.yaml"

    return build


def _set(path: str, value) -> Callable[[dict], None]:
    """Set the dotted/indexed ``path`` (``usage.0.input_tokens``) of a row or tasks mapping."""

    def mangle(data: dict) -> None:
        *parents, last = path.split(".")
        for part in parents:
            data = data[int(part)] if isinstance(data, list) else data[part]
        if isinstance(data, list):
            data[int(last)] = value
        else:
            data[last] = value

    return mangle


def _duplicate_task(tasks: dict) -> None:
    tasks["tasks"].append(dict(tasks["tasks"][0]))


def _drop_id(tasks: dict) -> None:
    del tasks["tasks"][0]["id"]


@dataclass(frozen=True)
class Case:
    id: str
    importer: str  # dataset | results | suite
    build: Callable[[Path], tuple[Path, Path]]  # tmp_path -> (what the importer is given, the file named)
    expected: str  # the error, "{file}" standing for the file named
    engine: bool = True  # the engine parser raises it too (an empty results file is simply no rows)


NOT_UTF8 = "not UTF-8 text: byte 0x{byte:02x} cannot be decoded (save the file as UTF-8)"
T = f"{{file}}:{TEST_LINE}: test test_one"
R = f"{{file}}:2: test {UID}"
S = "{file}: task retail/ticket_hold_carrier_exception"

CASES = [
    # ThinkingBox dataset (import_thinkingbox)
    Case(
        "dataset-init-server-list",
        "dataset",
        _dataset("query: Close it.\ninit:\n  tb_test_shop: [1, 2]\n"),
        f"{T}: field init.tb_test_shop must be a mapping, got list",
    ),
    Case(
        "dataset-init-server-string",
        "dataset",
        _dataset("query: Close it.\ninit:\n  tb_test_shop: reset everything\n"),
        f"{T}: field init.tb_test_shop must be a mapping, got str",
    ),
    Case(
        "dataset-rubrics-yesno-int",
        "dataset",
        _dataset(VALID_DOC.replace('["Is the ticket closed?"]', "5")),
        f"{T}: field init.tb_test_shop.rubrics_yesno must be a list of strings, got int",
    ),
    Case(
        "dataset-rubrics-yesno-dict-of-non-strings",
        "dataset",
        _dataset(VALID_DOC.replace('["Is the ticket closed?"]', "{1: 2, 3: [4]}")),
        f"{T}: field init.tb_test_shop.rubrics_yesno must be a list of strings, got dict",
    ),
    Case(
        "dataset-rubrics-yesno-list-of-non-strings",
        "dataset",
        _dataset(VALID_DOC.replace('["Is the ticket closed?"]', '["Closed?", {a: 1}]')),
        f"{T}: field init.tb_test_shop.rubrics_yesno[1] must be a string, got dict",
    ),
    Case(
        "dataset-golden-trajectory-not-a-list",
        "dataset",
        _dataset(VALID_DOC.replace("      tool_interactions:", "      tool_interactions: oops\n      x:")),
        f"{T}: init.tb_test_shop.golden_test_case.tool_interactions must be a list",
    ),
    Case(
        "dataset-user-context-not-text",
        "dataset",
        _dataset(VALID_DOC.replace("user_context: You are Alex Kim.", "user_context: {name: Alex}")),
        f"{T}: field 'user_context' must be a str, got dict",
    ),
    Case(
        "dataset-test-file-binary",
        "dataset",
        _dataset_file("test", BINARY),
        "{file}:1: NUL character: not a Python file",
    ),
    Case(
        "dataset-test-file-nul-in-a-string",
        "dataset",
        _dataset_file(
            "test",
            b'"""!\nscenario: tb_test_shop\n"""\n\nX = "a\x00b"\n',
        ),
        "{file}:5: NUL character: not a Python file",
    ),
    Case(
        "dataset-scenario-latin-1",
        "dataset",
        _dataset_file(
            "scenario",
            "world_state:\n  tb_test_shop: {}\ntools: []\nbot_instructions: Café policy\n".encode("latin-1"),
        ),
        "{file}:4: " + NOT_UTF8.format(byte=0xE9),
    ),
    Case(
        "dataset-scenario-empty",
        "dataset",
        _dataset_file("scenario", b""),
        "{file}: scenario must be a YAML mapping",
    ),
    Case(
        "dataset-scenario-top-level-list",
        "dataset",
        _dataset_file("scenario", b"- world_state\n- tools\n"),
        "{file}: scenario must be a YAML mapping",
    ),
    Case(
        "dataset-test-docstring-scalar",
        "dataset",
        _dataset("just some text\n"),
        '{file}:15: test test_one: test has no """! YAML docstring mapping',
    ),
    # tb infer results (import_tb_results)
    Case(
        "results-usage-tokens-abc",
        "results",
        _results(_set("usage.0.input_tokens", "abc")),
        f"{R}: field usage[0].input_tokens must be a non-negative int, got str",
    ),
    Case(
        "results-usage-tokens-negative",
        "results",
        _results(_set("usage.1.output_tokens", -5)),
        f"{R}: field usage[1].output_tokens must be a non-negative int, got -5",
    ),
    Case(
        "results-usage-details-not-a-dict",
        "results",
        _results(_set("usage.0.output_tokens_details", 7)),
        f"{R}: field usage[0].output_tokens_details must be dict, got int",
    ),
    Case(
        "results-tool-call-metadata-not-a-dict",
        "results",
        _results(_set("messages.3.tool_calls.0.metadata", "broken")),
        f"{R}: field messages[3].tool_calls[0].metadata must be dict, got str",
    ),
    Case(
        "results-message-metadata-not-a-dict",
        "results",
        _results(_set("messages.2.metadata", ["think"])),
        f"{R}: field messages[2].metadata must be dict, got list",
    ),
    Case(
        "results-tool-call-arguments-not-an-object",
        "results",
        _results(_set("messages.3.tool_calls.0.arguments", [1, 2])),
        f"{R}: field messages[3].tool_calls[0].arguments must be dict or str, got list",
    ),
    Case(
        "results-message-role-unknown",
        "results",
        _results(_set("messages.1.role", "wizard")),
        f"{R}: messages[1]: unknown Text role 'wizard'",
    ),
    Case(
        "results-repetition-negative",
        "results",
        _results(_set("metadata.repetition", -1)),
        f"{R}: field metadata.repetition must be 0..199 (at most 200 attempts per test, as for any "
        "campaign), got -1",
    ),
    Case(
        "results-repetition-huge",
        "results",
        _results(_set("metadata.repetition", 10**9)),
        f"{R}: field metadata.repetition must be 0..199 (at most 200 attempts per test, as for any "
        "campaign), got 1000000000",
    ),
    Case(
        "results-repetition-text",
        "results",
        _results(_set("metadata.repetition", "x")),
        f"{R}: field metadata.repetition must be int, got str",
    ),
    Case(
        "results-test-result-metadata-not-a-dict",
        "results",
        _results(_set("test_result.metadata", "judge")),
        f"{R}: field test_result.metadata must be dict, got str",
    ),
    Case("results-binary", "results", _results_file(BINARY), "{file}:1: NUL character: not a JSON file"),
    Case(
        "results-latin-1",
        "results",
        _results_file(ROWS.read_bytes().splitlines(keepends=True)[0] + '{"uid": "Café"}\n'.encode("latin-1")),
        "{file}:2: " + NOT_UTF8.format(byte=0xE9),
    ),
    Case(
        "results-yaml-binary",
        "results",
        _results_file(b"uid: x\n" + BINARY, name="one.yaml"),
        "{file}:2: NUL character: not a YAML file",
    ),
    Case(
        "results-yaml-top-level-scalar",
        "results",
        _results_file(b"42\n", name="one.yaml"),
        "{file}:1: field row must be dict, got int",
    ),
    Case("results-empty", "results", _results_file(b""), "{file}: no rows to import", engine=False),
    # our suite folders (load_suite)
    Case("suite-tasks-binary", "suite", _suite_file(BINARY), "{file}:1: NUL character: not a YAML file"),
    Case(
        "suite-tasks-latin-1",
        "suite",
        _suite_file("tasks:\n  - id: café\n".encode("latin-1")),
        "{file}:2: " + NOT_UTF8.format(byte=0xE9),
    ),
    Case(
        "suite-tasks-empty",
        "suite",
        _suite_file(b""),
        "{file}: tasks: the file must be a mapping with a 'tasks' list",
    ),
    Case(
        "suite-tasks-top-level-list",
        "suite",
        _suite_file(b"- id: a\n- id: b\n"),
        "{file}: tasks: the file must be a mapping with a 'tasks' list",
    ),
    Case(
        "suite-task-missing-id",
        "suite",
        _suite(_drop_id),
        "{file}: tasks[0].id: every task needs a non-empty string id",
    ),
    Case("suite-duplicate-task-ids", "suite", _suite(_duplicate_task), f"{S}: id: duplicate task id"),
    Case(
        "suite-golden-not-a-list",
        "suite",
        _suite(_set("tasks.0.golden", {"tool": "get_order"})),
        f"{S}: golden: must be a list of {{{{tool, arguments}}}}",
    ),
    Case(
        "suite-primary-key-a-list",
        "suite",
        _suite(_set("tasks.0.data_patch.customers.0.id", ["C-10"])),
        f"{S}: data_patch.customers[0].id: expected text, got ['C-10']",
    ),
    Case(
        "suite-check-table-a-list",
        "suite",
        _suite(_set("tasks.0.checks.0.table", ["tickets"])),
        f"{S}: checks[0].table: unknown table ['tickets']",
    ),
    Case(
        "suite-yaml-error",
        "suite",
        _suite_file(b"tasks:\n  - id: a\n    query: [unclosed\n"),
        "{file}:4: invalid YAML: did not find expected ',' or ']'",
    ),
]


# --- running an importer -------------------------------------------------------------------------


def _engine(importer: str, target: Path) -> None:
    if importer == "dataset":
        read_dataset(target)
    elif importer == "results":
        parse_tb_results(target)
    else:
        load_suite(target)


def _argv(importer: str, target: Path) -> list[str]:
    if importer == "dataset":
        return ["import_thinkingbox", "--dataset", str(target), "--no-launch"]
    if importer == "results":
        return ["import_tb_results", str(target), "--campaign", "malformed"]
    return ["load_suite", "--suite", str(target), "--no-validate"]  # SUITES_DIR / an absolute path


def _command(monkeypatch, capsys, argv: list[str]) -> tuple[int | str | None, str]:
    """``manage.py <argv>`` as from the shell: (exit status, stderr); any other exception propagates."""
    monkeypatch.setattr(connections, "close_all", lambda: None)  # keep the test's transaction open
    capsys.readouterr()
    try:
        execute_from_command_line(["manage.py", *argv])
    except SystemExit as exited:
        return exited.code, capsys.readouterr().err
    return 0, capsys.readouterr().err


@pytest.fixture
def one_team(alice):
    """The team import_tb_results picks without --team, with a member to own the campaign."""
    return alice


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@pytest.mark.django_db
def test_malformed_input_is_one_clear_error_and_writes_nothing(case, tmp_path, monkeypatch, capsys, one_team):
    target, named = case.build(tmp_path)
    expected = case.expected.format(file=named)
    error_type = SpecError if case.importer == "suite" else ThinkingBoxFormatError

    if case.engine:
        with pytest.raises(error_type) as raised:
            _engine(case.importer, target)
        assert str(raised.value) == expected

    before = table_counts()
    status, stderr = _command(monkeypatch, capsys, _argv(case.importer, target))
    assert (status, stderr) == (1, f"CommandError: {expected}\n")
    assert table_counts() == before


# --- a NUL inside a string is stored, shown as ␀ ---------------------------------------------------


def _nul_imports(tmp_path: Path, monkeypatch, capsys) -> None:
    """Import a dataset, tb infer rows and a suite, each holding a NUL in a string; each succeeds."""
    dataset = write_dataset(
        tmp_path / "dataset", [_tb_test(VALID_DOC.replace("Please close my ticket.", '"Close\\\\0 it."'))]
    )
    rows = _real_rows()
    rows[1]["messages"][1]["content"] = "Find\x00 the file"
    results = tmp_path / "rows.jsonl"
    results.write_text("".join(json.dumps(row) + "\n" for row in rows))
    tasks = _valid_tasks()
    tasks["tasks"][0]["query"] = "Where is\x00 my desk?"
    suite = _suite_folder(tmp_path)
    (suite / "retail/tasks.yaml").write_text(yaml.safe_dump(tasks))
    for importer, target in (("dataset", dataset), ("results", results), ("suite", suite)):
        status, stderr = _command(monkeypatch, capsys, _argv(importer, target))
        assert (status, stderr) == (0, "")


def _nul_stored() -> tuple[str, str, str]:
    dataset_task = Task.objects.get(task_id="shop.py:test_one")
    suite_task = Task.objects.get(
        task_id="retail/ticket_hold_carrier_exception", suite__name="malformed-test"
    )
    attempt = Attempt.objects.get(campaign__name="malformed", index=1)
    user = next(m for m in attempt.result["transcript"]["messages"] if m["role"] == "user")
    return dataset_task.spec["query"], user["content"], suite_task.spec["query"]


EXPECTED_NUL = ("Close\u2400 it.", "Find\u2400 the file", "Where is\u2400 my desk?")


@pytest.mark.django_db
def test_nul_in_imported_strings_is_stored_shown_as_the_nul_symbol(tmp_path, monkeypatch, capsys, one_team):
    _nul_imports(tmp_path, monkeypatch, capsys)
    assert _nul_stored() == EXPECTED_NUL


@pytest.mark.integration
@pytest.mark.django_db
def test_nul_in_imported_strings_saves_on_postgresql(tmp_path, monkeypatch, capsys, one_team):
    assert connections["default"].vendor == "postgresql"
    _nul_imports(tmp_path, monkeypatch, capsys)  # DataError before: PostgreSQL refuses NUL in text/jsonb
    assert _nul_stored() == EXPECTED_NUL
