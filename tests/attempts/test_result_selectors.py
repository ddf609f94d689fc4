"""Stored results are read back through one typed door (apps.attempts.selectors.results)."""

from __future__ import annotations

import pytest

from apps.attempts.selectors.results import StoredResultError, stored_result
from tb_engine.attempt_setup import AttemptSetup
from tb_engine.loader import load_builtin_suite
from tb_engine.result_format import ResultFormatError


def golden_result():
    suite = load_builtin_suite()
    task = suite.tasks[sorted(suite.tasks)[0]]
    domain = suite.domains[task.domain]
    return AttemptSetup.from_config(domain, task, agent="golden").run()


def test_a_stored_result_reads_back_equal_to_the_engine_result():
    result = golden_result()

    assert stored_result(result.to_dict()) == result


def test_an_attempt_without_a_result_reads_as_none():
    assert stored_result({}) is None


def test_an_unknown_format_names_the_attempt_field_and_version():
    stored = {**golden_result().to_dict(), "format_version": 99}

    with pytest.raises(StoredResultError) as raised:
        stored_result(stored, attempt_id=7)

    assert str(raised.value) == (
        "attempt 7: stored result: field format_version is 99, a format this engine does not read "
        "(it reads version 1)"
    )
    assert isinstance(raised.value, ResultFormatError)
