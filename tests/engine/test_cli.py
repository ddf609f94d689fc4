"""The CLI report functions and exit codes."""

from __future__ import annotations

from tb_engine.cli import main, run_task_report, validate_suite_report
from tb_engine.loader import load_builtin_suite


def test_validate_suite_report_counts_builtin_suite():
    suite = load_builtin_suite()
    text, code = validate_suite_report("starter")
    assert (
        text.splitlines()[0]
        == f"{len(suite.tasks)} tasks: {len(suite.tasks)} valid, 0 invalid, 0 non-discriminating"
    )
    assert code == 0


def test_run_task_report_golden_lists_each_attempt():
    lines = run_task_report("retail/ticket_hold_carrier_exception", agent="golden", repeat=2).splitlines()
    assert (
        lines[0]
        == "retail/ticket_hold_carrier_exception — Late parcel, carrier exception still open (agent golden, 2 attempts)"
    )
    assert [line.split(" (")[0] for line in lines[1:3]] == ["attempt 0: pass", "attempt 1: pass"]
    assert lines[-1] == "2/2 passed"


def test_cli_main_unknown_task_exits_2(capsys):
    assert main(["run", "retail/no_such_task"]) == 2
    assert capsys.readouterr().err == "error: \"unknown task 'retail/no_such_task' in suite 'starter'\"\n"
