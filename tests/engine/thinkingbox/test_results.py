"""tb infer results import and tb agg-compatible figures, against the real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_engine.results import AttemptResult
from tb_engine.thinkingbox.agg import format_tb_agg_summary, our_figures, tb_agg_figures
from tb_engine.thinkingbox.errors import ThinkingBoxFormatError
from tb_engine.thinkingbox.results import parse_tb_results, parse_tb_row
from tests.support.paths import THINKINGBOX_DIR

REF = THINKINGBOX_DIR / "tb_infer"
JSONL = REF / "append_r6.jsonl"

pytestmark = pytest.mark.skipif(not REF.exists(), reason="ThinkingBox reference material not present")


def _real_rows() -> list[dict]:
    return [json.loads(line) for line in JSONL.read_text().splitlines()]


def _write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_parse_tb_results_reads_every_attempt():
    records = parse_tb_results(JSONL)
    assert [r.task_id for r in records] == ["cloud_drive.py:test_append_some_more_text"] * 6
    assert [r.repetition for r in records] == [0, 1, 2, 3, 4, 5]
    assert [r.verdict for r in records] == ["pass", "pass", "fail", "pass", "fail", "pass"]
    assert [r.line for r in records] == [1, 2, 3, 4, 5, 6]
    assert {r.status for r in records} == {"done"}
    assert {r.termination for r in records} == {"agent_done"}


def test_parse_tb_results_converts_transcript_to_our_types():
    record = parse_tb_results(JSONL)[0]
    transcript = record.transcript
    assert [m.role for m in transcript.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [c.name for c in transcript.tool_calls] == ["search_files", "get_text_content", "upload_file"]
    assert transcript.tool_calls[2].arguments["overwrite"] is True
    assert transcript.tool_calls[1].result == {"status": "ok", "text_content": "some text"}
    assert (
        transcript.final_reply()
        == "I modified Documents/file.txt and appended 'some more text' on a new line. <DONE>"
    )
    assert record.reasoning == (
        (2, "Find the file first, then read it."),
        (8, "Upload succeeded; confirm to the user."),
    )
    assert record.message_tags[-1] == "text"
    assert transcript.messages[3].tool_call_id == transcript.tool_calls[0].id


def test_parse_tb_results_sums_agent_usage():
    record = parse_tb_results(JSONL)[0]
    assert record.usage.input_tokens == 1339 + 1461 + 1548 + 1642
    assert record.usage.output_tokens == 248
    assert record.usage.reasoning_tokens == 19
    assert record.usage.calls == 4
    assert record.transcript.agent_usage == record.usage


def test_parse_tb_results_failure_keeps_failing_line():
    record = parse_tb_results(JSONL)[2]
    assert record.failure["lineno"] == 19
    assert record.failure["line_content"].strip() == "text == expected_text"
    assert record.to_attempt_result().extra["thinkingbox"]["failure"]["lineno"] == 19


def test_parse_tb_results_single_yaml_result_with_effects():
    records = parse_tb_results(REF / "single_append_full.yaml")
    assert len(records) == 1
    assert records[0].verdict == "pass"
    assert sorted(records[0].raw_effects) == ["cloud_drive"]  # not a database server: kept raw
    assert records[0].raw_effects["cloud_drive"]["effects"][0]["type"] == "overwrite"


def test_parse_tb_results_system_error_row_is_infra_error(tmp_path):
    rows = _real_rows()
    rows[1]["is_system_error"] = True
    rows[1]["test_result"] = None
    rows[1]["metadata"]["error"] = {"type": "asyncio.CancelledError", "message": "Task cancelled", "tb": ""}
    records = parse_tb_results(_write_rows(tmp_path / "r.jsonl", rows))
    assert records[1].status == "infra_error"
    assert records[1].verdict is None
    assert records[1].error == "tb infer system error: asyncio.CancelledError: Task cancelled"


def test_tb_agg_figures_match_printed_tb_agg_output():
    figures = tb_agg_figures(parse_tb_results(JSONL))
    printed = (REF / "agg_append_r6.txt").read_text().rstrip("\n").splitlines()
    assert format_tb_agg_summary(figures).splitlines() == printed[-10:]


def test_tb_agg_figures_per_test_row_matches_printed_table():
    row = tb_agg_figures(parse_tb_results(JSONL)).per_test[0]
    assert (row.runs, row.passes, row.fails, row.errors) == (6, 4, 2, 0)
    assert (row.assistant_texts.mean, row.user_texts.mean, row.tool_responses.mean) == (3, 1, 3)
    assert (row.output_tokens.mean, row.reasoning_tokens.mean, row.char_length.mean) == (248, 19, 1948)
    assert (
        f"{row.execution_time.mean:.2f} ({row.execution_time.low:.2f}-{row.execution_time.high:.2f})"
        == "3.42 (2.98-3.66)"
    )
    assert f"{row.success_pct:.2f}" == "66.67"
    assert (row.in_zone, f"{row.p_zone:.2f}") == (True, "0.98")


def test_tb_agg_figures_count_errors_as_failures_but_ours_exclude_them(tmp_path):
    rows = _real_rows()
    rows[0]["is_system_error"] = True  # a passing attempt lost to infrastructure
    records = parse_tb_results(_write_rows(tmp_path / "r.jsonl", rows))
    theirs = tb_agg_figures(records)
    ours = our_figures(records)
    assert theirs.mean_pass == 3 / 6
    assert theirs.per_test[0].errors == 1
    assert ours.pass_at_1 == 3 / 5
    assert (ours.attempts_done, ours.infra_errors, ours.coverage, ours.incomplete_tasks) == (5, 1, 5 / 6, 1)


def test_tb_agg_figures_drop_pass_at_k_when_attempt_counts_differ(tmp_path):
    rows = _real_rows()
    other = json.loads(json.dumps(rows[0]))
    other["uid"] = "cloud_drive.py:test_other"
    records = parse_tb_results(_write_rows(tmp_path / "r.jsonl", rows + [other]))
    figures = tb_agg_figures(records)
    assert (figures.runs_per_test, figures.equal_runs) == (6, False)
    assert figures.pass_at_k == ()
    # tb agg prints the first test's count, not a marker that the counts differ
    assert format_tb_agg_summary(figures).splitlines() == [
        "Number of tests: 2",
        "Runs per test: 6",
        "Total runs: 7",
        "Mean per-sample accuracy: 0.71 (95% CI: 0.35-0.94)",
    ]


def test_tb_agg_figures_runs_per_test_is_the_first_tests_count(tmp_path):
    rows = _real_rows()
    other = json.loads(json.dumps(rows[0]))
    other["uid"] = "cloud_drive.py:test_other"
    records = parse_tb_results(_write_rows(tmp_path / "r.jsonl", [other, *rows[:4]]))
    figures = tb_agg_figures(records)
    assert (figures.runs_per_test, figures.equal_runs, figures.total_runs) == (1, False, 5)


def test_our_figures_with_unequal_run_counts_average_each_k_over_tasks_with_enough_attempts(tmp_path):
    rows = _real_rows()  # 6 attempts, 4 pass
    other = json.loads(json.dumps(rows[0]))  # 1 attempt, passes
    other["uid"] = "cloud_drive.py:test_other"
    ours = our_figures(parse_tb_results(_write_rows(tmp_path / "r.jsonl", rows + [other])))
    assert dict(ours.k_tasks) == {1: 2, 5: 1}
    assert dict(ours.pass_at_k) == pytest.approx({1: (4 / 6 + 1) / 2, 5: 1.0})
    assert dict(ours.pass_power_k)[5] == 0.0
    assert dict(ours.pass_power_k_plugin) == pytest.approx(
        {1: (4 / 6 + 1) / 2, 5: (4 / 6) ** 5}
    )  # as unbiased
    assert (ours.runs_min, ours.runs_max) == (1, 6)


def test_tb_agg_tool_call_column_counts_tool_responses(tmp_path):
    row = _real_rows()[0]
    calls = [m for m in row["messages"] if m["T"] == "ParallelToolCall"]
    responses = [m for m in row["messages"] if m["T"] == "ToolResponse"]
    assert (len(calls), len(responses)) == (3, 3)
    # one message with two calls, both answered; then an end-turn call nobody answers
    first = calls[0]
    second_call = {**first["tool_calls"][0], "id": "call_extra"}
    first["tool_calls"].append(second_call)
    at = row["messages"].index(first) + 1
    row["messages"].insert(at + 1, {**responses[0], "id": "call_extra"})
    row["messages"].insert(
        len(row["messages"]) - 1,
        {"T": "ParallelToolCall", "tool_calls": [{"name": "end_turn", "arguments": {}, "id": "call_end"}]},
    )
    records = parse_tb_results(_write_rows(tmp_path / "r.jsonl", [row]))
    assert records[0].stats.tool_responses == 4
    assert tb_agg_figures(records).per_test[0].tool_responses.mean == 4


def test_parse_tb_results_failure_keeps_the_failing_line_and_the_assert_message():
    record = parse_tb_results(JSONL)[2]
    assert record.verdict == "fail"
    assert (record.failure["lineno"], record.failure["line_content"].strip()) == (19, "text == expected_text")
    assert record.failure["message"] == (
        "AssertionError: File content, expected: 'some text\\nsome more text', found 'some text some more text'"
    )
    assert record.to_attempt_result().extra["thinkingbox"]["failure"]["message"] == record.failure["message"]
    assert "message" not in parse_tb_results(JSONL)[0].failure


def test_our_figures_use_unbiased_pass_power_k():
    ours = our_figures(parse_tb_results(JSONL))
    assert dict(ours.pass_power_k)[5] == 0.0  # C(4,5)/C(6,5): no 5-subset of 6 attempts is all passes
    assert round(dict(ours.pass_power_k_plugin)[5], 4) == round((4 / 6) ** 5, 4)
    assert dict(ours.pass_at_k)[5] == 1.0
    assert (ours.all_n_count, ours.pass_at_n_observed, ours.gap_points) == (0, 1.0, 100.0)


def test_parse_tb_results_truncated_line_names_file_and_line(tmp_path):
    lines = JSONL.read_text().splitlines()
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines[:3] + [lines[3][:500]]) + "\n")
    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_tb_results(path)
    assert (caught.value.file, caught.value.line) == (str(path), 4)
    assert caught.value.message.startswith("invalid or truncated JSON")


def test_parse_tb_row_unknown_message_kind_is_an_error():
    row = _real_rows()[0]
    row["messages"][4]["T"] = "Hologram"
    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_tb_row(row, file="x.jsonl", line=7)
    assert str(caught.value) == (
        "x.jsonl:7: test cloud_drive.py:test_append_some_more_text: messages[4]: unknown message kind T='Hologram'"
    )


def test_parse_tb_row_wrong_type_is_an_error():
    row = _real_rows()[0]
    row["metadata"]["repetition"] = "zero"
    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_tb_row(row, file="x.jsonl", line=2)
    assert caught.value.message == "field metadata.repetition must be int, got str"


def test_parse_tb_row_tool_error_result_becomes_tool_call_error():
    row = _real_rows()[0]
    row["messages"][4]["content"] = json.dumps(
        {"error": "Tool execution failed: no such file", "tool": "search_files"}
    )
    record = parse_tb_row(row)
    assert record.transcript.tool_calls[0].error == "Tool execution failed: no such file"
    assert record.transcript.messages[3].is_error is True


def test_parse_tb_row_database_effects_become_our_diff_beside_their_hash():
    effects = json.loads(
        Path(
            str(
                THINKINGBOX_DIR
                / "effects/effects_sandbox_external_retail_test_case_ST002_001_change_arg.json"
            )
        ).read_text()
    )
    row = _real_rows()[2]
    row["test_context"] = {"effects": {"sandbox_external_retail": effects["geteffects"]}}
    attempt = parse_tb_row(row).to_attempt_result(task_hash="abc")
    assert [(d.kind, d.key, d.field) for d in attempt.diff] == [("wrong_value", "6", "status")]
    assert attempt.categories == ["wrong_value"]
    evidence = attempt.extra["thinkingbox"]["effects"]["sandbox_external_retail"]
    assert (evidence["their_hash_pass"], evidence["our_state_pass"], evidence["disagree"]) == (
        False,
        False,
        False,
    )
    assert len(evidence["positional_diff"]) == 1


@pytest.mark.parametrize("repetition", [-1, 200, 99999])
def test_parse_tb_row_repetition_outside_the_campaign_bound_is_an_error(repetition):
    row = _real_rows()[0]
    row["metadata"]["repetition"] = repetition
    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_tb_row(row, file="x.jsonl", line=3)
    assert str(caught.value) == (
        "x.jsonl:3: test cloud_drive.py:test_append_some_more_text: field metadata.repetition must be "
        f"0..199 (at most 200 attempts per test, as for any campaign), got {repetition}"
    )


def test_parse_tb_results_yaml_alias_bomb_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    levels = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    levels += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 8)]
    path.write_text("\n".join(levels) + "\n")
    assert len(path.read_bytes()) < 700

    with pytest.raises(ThinkingBoxFormatError) as caught:
        parse_tb_results(path)

    assert (caught.value.file, caught.value.line) == (str(path), 4)  # the anchor whose copies cross the bound
    assert caught.value.message == (
        "malformed YAML: aliases expand to more than 10000 nodes (alias bomb?); anchor here"
    )


def test_imported_attempts_round_trip_through_the_stored_result_format():
    effects = json.loads(
        (
            THINKINGBOX_DIR / "effects/effects_sandbox_external_retail_test_case_ST002_001_change_arg.json"
        ).read_text()
    )
    with_effects = _real_rows()[2]
    with_effects["test_context"] = {"effects": {"sandbox_external_retail": effects["geteffects"]}}
    records = [
        *parse_tb_results(JSONL),
        *parse_tb_results(REF / "single_append_full.yaml"),
        parse_tb_row(with_effects),
    ]
    attempts = [record.to_attempt_result(task_hash="abc") for record in records]
    assert any(a.diff for a in attempts) and {a.verdict for a in attempts} == {"pass", "fail"}
    for attempt in attempts:
        stored = json.loads(json.dumps(attempt.to_dict()))
        assert AttemptResult.from_dict(stored).to_dict() == stored
        assert AttemptResult.from_dict(attempt.to_dict()) == attempt
