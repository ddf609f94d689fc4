"""``tb infer`` output (JSONL rows, or one YAML result) -> TbRecord per attempt, with our transcript types.

Every row is checked before anything is returned: a truncated JSON line, a wrong type or an
unknown message kind raises ThinkingBoxFormatError naming the file and line; there is no
partial result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tb_engine.results import AttemptResult
from tb_engine.textfile import NotText, read_text
from tb_engine.thinkingbox.effects import EffectsComparison, compare_effects, is_db_effects
from tb_engine.thinkingbox.errors import ThinkingBoxFormatError
from tb_engine.transcript import Message, ToolCall, ToolCallRequest, Transcript, Usage
from tb_engine.yaml_bounded import load_yaml

# tb infer finish_reason -> our termination (SPEC §2). "skipped" rows are cancelled, not graded.
_TERMINATION = {
    "done": "agent_done",
    "end_turn_tool": "agent_done",  # the agent called a tool that ends its turn for good
    "no_user_llm": "agent_done",  # no user simulator configured: the agent's reply ends the attempt
    "user_done": "user_done",
    "agent_limit": "max_turns",
    "user_limit": "max_turns",
    "agent_error": "agent_error",
    "skipped": None,
}


@dataclass(frozen=True)
class TbRowStats:
    """What tb agg's per-test table averages over (counted from the raw row)."""

    assistant_texts: int = 0  # Text messages with role assistant (think included, as tb counts them)
    user_texts: int = 0
    tool_responses: int = 0  # ToolResponse messages: what tb agg's Avg-TC column counts
    output_tokens: int = 0
    reasoning_tokens: int = 0
    char_length: int = 0  # characters over all Text messages, system prompt included
    execution_time: float = 0.0


@dataclass
class TbRecord:
    """One imported attempt (one row of tb infer output)."""

    task_id: str  # "<test file>:<test name>"
    repetition: int
    line: int  # 1-based line in the source file
    status: str  # done | infra_error | cancelled
    verdict: str | None  # ThinkingBox's own verdict: pass | fail (None unless done)
    termination: str | None
    transcript: Transcript
    usage: Usage
    finish_reason: str
    reward: float | None = None
    error: str = ""
    message_tags: tuple[
        str | None, ...
    ] = ()  # ThinkingBox Text tag per transcript message (text/direct/None)
    reasoning: tuple[tuple[int, str], ...] = ()  # (position in messages, think text): hidden reasoning
    stats: TbRowStats = field(default_factory=TbRowStats)
    tb_error_row: bool = False  # counted in tb agg's Error column
    effects: dict[str, EffectsComparison] = field(default_factory=dict)  # server -> our diff vs their hash
    raw_effects: dict[str, Any] = field(default_factory=dict)  # effects we cannot diff (non-database servers)
    failure: dict[str, Any] = field(default_factory=dict)  # traceback, failing line, judge motivations
    agent: str = "unknown"  # metadata.agent: who ran it

    @property
    def passed(self) -> bool:
        return self.status == "done" and self.verdict == "pass"

    def to_attempt_result(self, task_hash: str = "") -> AttemptResult:
        """The record as our AttemptResult; ThinkingBox evidence goes under extra["thinkingbox"]."""
        diff = [item for comparison in self.effects.values() for item in comparison.diff]
        categories: list[str] = sorted({item.kind for item in diff})
        # A standard ThinkingBox test checks the state hash, then the rubrics: a failure with
        # every hash matching can only come from a rubric.
        if self.verdict == "fail" and self.effects and all(c.hash_pass for c in self.effects.values()):
            categories.append("rubric_failed")
        evidence = {
            "repetition": self.repetition,
            "line": self.line,
            "finish_reason": self.finish_reason,
            "reward": self.reward,
            "message_tags": list(self.message_tags),
            "reasoning": [list(r) for r in self.reasoning],
            "failure": self.failure,
            "effects": {server: c.evidence() for server, c in self.effects.items()},
            "raw_effects": self.raw_effects,
        }
        return AttemptResult(
            task_id=self.task_id,
            task_hash=task_hash,
            status=self.status,  # type: ignore[arg-type]
            termination=self.termination,  # type: ignore[arg-type]
            verdict=self.verdict,  # type: ignore[arg-type]
            transcript=self.transcript,
            diff=diff,
            categories=sorted(set(categories)),
            error=self.error,
            duration_ms=self.stats.execution_time * 1000.0,
            extra={"thinkingbox": evidence},
        )


# A campaign runs at most 200 attempts per task (the API's bound on N): an import obeys the same.
MAX_REPETITIONS = 200


def _text(path: Path, what: str) -> str:
    try:
        return read_text(path, what)
    except NotText as exc:
        raise ThinkingBoxFormatError(exc.message, file=path, line=exc.line) from exc


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    if path.suffix in (".yaml", ".yml"):
        text = _text(path, "YAML")
        try:
            yield 1, load_yaml(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or str(exc)
            line = mark.line + 1 if mark is not None else 1
            raise ThinkingBoxFormatError(f"malformed YAML: {problem}", file=path, line=line) from exc
        return
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ThinkingBoxFormatError(f"cannot read the file: {exc.strerror}", file=path) from exc
    # One line at a time: a results file can hold a million rows (hundreds of MB).
    with handle:
        for number, data in enumerate(handle, start=1):
            if data.strip():
                yield number, _json_line(data, path, number)


def _json_line(data: bytes, path: Path, number: int) -> Any:
    """One JSONL line decoded, with read_text's errors for NUL and non-UTF-8 bytes."""
    if b"\x00" in data:
        raise ThinkingBoxFormatError("NUL character: not a JSON file", file=path, line=number)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ThinkingBoxFormatError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be decoded (save the file as UTF-8)",
            file=path,
            line=number,
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ThinkingBoxFormatError(
            f"invalid or truncated JSON: {exc.msg} at column {exc.colno}", file=path, line=number
        ) from exc


def iter_tb_results(path: str | Path) -> Iterator[TbRecord]:
    """The attempts of a tb infer output file one by one, read as they are needed (memory stays flat)."""
    path = Path(path)
    for number, row in _rows(path):
        yield parse_tb_row(row, file=str(path), line=number)


def iter_tb_lines(path: str | Path, *, size: int) -> Iterator[list[tuple[int, bytes]]]:
    """A JSONL file's non-blank lines, undecoded, ``size`` at a time with their line numbers (for parse_tb_line)."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ThinkingBoxFormatError(f"cannot read the file: {exc.strerror}", file=path) from exc
    chunk: list[tuple[int, bytes]] = []
    with handle:
        for number, data in enumerate(handle, start=1):
            if data.strip():
                chunk.append((number, data))
                if len(chunk) == size:
                    yield chunk
                    chunk = []
    if chunk:
        yield chunk


def parse_tb_line(data: bytes, *, file: str, line: int) -> TbRecord:
    """One JSONL line of a tb infer file as a TbRecord, with iter_tb_results' errors."""
    return parse_tb_row(_json_line(data, Path(file), line), file=file, line=line)


@dataclass(frozen=True)
class TbRowKey:
    """What identifies a row (its test and repetition) and its agent, read without parsing the rest."""

    task_id: str
    repetition: int
    agent: str
    line: int
    row: Any  # the decoded JSON row, for parse_tb_row when the whole row is needed


def iter_tb_row_keys(path: str | Path) -> Iterator[TbRowKey]:
    """Each row's key, checked as parse_tb_row checks it: a cheap first pass over a big file.

    Every line is still decoded (bad JSON raises here, naming its line); the messages, usage and
    results are only checked by parse_tb_row.
    """
    path = Path(path)
    for number, row in _rows(path):
        task_id, repetition, metadata = _key(row, file=str(path), line=number)
        yield TbRowKey(task_id, repetition, _agent(metadata), number, row)


def parse_tb_results(path: str | Path) -> list[TbRecord]:
    """All attempts of a tb infer output file (JSONL, or a single-result YAML) as TbRecords."""
    return list(iter_tb_results(path))


def _expect(
    value: Any, kind: type | tuple[type, ...], where: str, *, file: str, line: int, optional: bool = False
) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ThinkingBoxFormatError(
            f"field {where} must be {names}, got {type(value).__name__}", file=file, line=line
        )
    return value


def parse_tb_row(row: Any, *, file: str = "<row>", line: int = 1) -> TbRecord:
    """One tb infer row (already decoded from JSON) as a TbRecord; errors name the row's test."""
    uid, repetition, metadata = _key(row, file=file, line=line)
    try:
        return _parse_row(row, uid, repetition, metadata, file=file, line=line)
    except ThinkingBoxFormatError as exc:
        if exc.test:
            raise
        raise ThinkingBoxFormatError(exc.message, file=exc.file, line=exc.line, test=uid) from exc


def _key(row: Any, *, file: str, line: int) -> tuple[str, int, dict]:
    """(uid, repetition, metadata) of a row, each checked; errors past the uid name the row's test."""
    _expect(row, dict, "row", file=file, line=line)
    uid = _expect(row.get("uid"), str, "uid", file=file, line=line)
    if ":" not in uid:
        raise ThinkingBoxFormatError(f"uid {uid!r} is not '<file>:<test>'", file=file, line=line)
    try:
        metadata = _expect(row.get("metadata"), dict, "metadata", file=file, line=line)
        repetition = _expect(metadata.get("repetition", 0), int, "metadata.repetition", file=file, line=line)
    except ThinkingBoxFormatError as exc:
        raise ThinkingBoxFormatError(exc.message, file=exc.file, line=exc.line, test=uid) from exc
    if not 0 <= repetition < MAX_REPETITIONS:
        raise ThinkingBoxFormatError(
            f"field metadata.repetition must be 0..{MAX_REPETITIONS - 1} (at most {MAX_REPETITIONS} attempts "
            f"per test, as for any campaign), got {repetition}",
            file=file,
            line=line,
            test=uid,
        )
    return uid, repetition, metadata


def _agent(metadata: dict) -> str:
    return str(metadata.get("agent") or "unknown")


def _parse_row(row: dict, uid: str, repetition: int, metadata: dict, *, file: str, line: int) -> TbRecord:
    messages = _expect(row.get("messages"), list, "messages", file=file, line=line)
    system_error = _expect(row.get("is_system_error", False), bool, "is_system_error", file=file, line=line)
    finish_reason = _expect(row.get("finish_reason") or "", str, "finish_reason", file=file, line=line)
    if finish_reason and finish_reason not in _TERMINATION:
        raise ThinkingBoxFormatError(f"unknown finish_reason {finish_reason!r}", file=file, line=line)
    test_result = _expect(row.get("test_result"), dict, "test_result", file=file, line=line, optional=True)
    usage_rows = _expect(row.get("usage"), list, "usage", file=file, line=line, optional=True) or []

    transcript, tags, reasoning, stats = _convert_messages(messages, file=file, line=line)
    usage = _usage(usage_rows, file=file, line=line)
    transcript.agent_usage = usage
    execution_time = _expect(
        metadata.get("execution_time", 0.0), (int, float), "metadata.execution_time", file=file, line=line
    )
    stats = TbRowStats(
        assistant_texts=stats.assistant_texts,
        user_texts=stats.user_texts,
        tool_responses=stats.tool_responses,
        output_tokens=usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        char_length=stats.char_length,
        execution_time=float(execution_time),
    )
    if test_result is not None:
        _expect(
            test_result.get("metadata"), dict, "test_result.metadata", file=file, line=line, optional=True
        )
        _expect(test_result.get("tb"), str, "test_result.tb", file=file, line=line, optional=True)
        _expect(
            test_result.get("reward"), (int, float), "test_result.reward", file=file, line=line, optional=True
        )
    status, verdict, error, test_error = _outcome(system_error, test_result, finish_reason, metadata)
    effects, raw_effects = _effects(row.get("test_context"), file=file, line=line)
    failure = {}
    if test_result:
        failure = {
            k: test_result.get(k)
            for k in ("tb", "lineno", "line_content")
            if test_result.get(k) not in (None, "", -1)
        }
        message = _exception_line(test_result.get("tb"))
        if message:
            failure["message"] = message
        judge = (test_result.get("metadata") or {}).get("judge_motivation")
        if judge:
            failure["judge_motivation"] = judge
    return TbRecord(
        task_id=uid,
        repetition=repetition,
        line=line,
        status=status,
        verdict=verdict,
        termination=_TERMINATION.get(finish_reason) if status == "done" else None,
        transcript=transcript,
        usage=usage,
        finish_reason=finish_reason,
        reward=(test_result or {}).get("reward"),
        error=error,
        message_tags=tags,
        reasoning=reasoning,
        stats=stats,
        tb_error_row=system_error or test_error,
        effects=effects,
        raw_effects=raw_effects,
        failure=failure,
        agent=_agent(metadata),
    )


def _outcome(
    system_error: bool, test_result: dict | None, finish_reason: str, metadata: dict
) -> tuple[str, str | None, str, bool]:
    """(status, verdict, error text, test-code error) following SPEC §2: infrastructure problems are not failures."""
    if system_error:
        info = metadata.get("error") or {}
        detail = (
            f"{info.get('type', '')}: {info.get('message', '')}".strip(": ")
            if isinstance(info, dict)
            else str(info)
        )
        return "infra_error", None, f"tb infer system error: {detail or 'no detail'}", False
    if finish_reason == "skipped":
        return "cancelled", None, "skipped by tb infer", False
    if test_result is None:
        return "infra_error", None, "no test result in the row", False
    if test_result.get("is_system_error"):
        # The test code itself crashed (not an assertion): a harness fault, never the agent's failure.
        return "infra_error", None, f"test code error: {(test_result.get('tb') or '').strip()[-500:]}", True
    return "done", ("pass" if test_result.get("result") is True else "fail"), "", False


def _exception_line(traceback: Any) -> str:
    """The last line of a traceback: the exception and its message (the assert's text, the hash mismatch)."""
    if not isinstance(traceback, str):
        return ""
    lines = [line.strip() for line in traceback.strip().splitlines() if line.strip()]
    return lines[-1] if lines and not lines[-1].startswith(("Traceback", 'File "')) else ""


def _tokens(entry: dict, key: str, where: str, *, file: str, line: int) -> int:
    """A token count of a usage entry: absent or null is 0, else a non-negative int."""
    value = entry.get(key)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        got = value if isinstance(value, int) and not isinstance(value, bool) else type(value).__name__
        raise ThinkingBoxFormatError(
            f"field {where}.{key} must be a non-negative int, got {got}", file=file, line=line
        )
    return value


def _usage(rows: list, *, file: str, line: int) -> Usage:
    total = Usage()
    for position, entry in enumerate(rows):
        where = f"usage[{position}]"
        _expect(entry, dict, where, file=file, line=line)
        details = {}
        for key in ("input_tokens_details", "output_tokens_details"):
            details[key] = (
                _expect(entry.get(key), dict, f"{where}.{key}", file=file, line=line, optional=True) or {}
            )
        total = total + Usage(
            input_tokens=_tokens(entry, "input_tokens", where, file=file, line=line),
            cached_input_tokens=_tokens(
                details["input_tokens_details"],
                "cached_tokens",
                f"{where}.input_tokens_details",
                file=file,
                line=line,
            ),
            output_tokens=_tokens(entry, "output_tokens", where, file=file, line=line),
            reasoning_tokens=_tokens(
                details["output_tokens_details"],
                "reasoning_tokens",
                f"{where}.output_tokens_details",
                file=file,
                line=line,
            ),
            calls=1,
        )
    return total


def _convert_messages(
    messages: list, *, file: str, line: int
) -> tuple[Transcript, tuple[str | None, ...], tuple[tuple[int, str], ...], TbRowStats]:
    transcript = Transcript()
    tags: list[str | None] = []
    reasoning: list[tuple[int, str]] = []
    calls_by_id: dict[str, ToolCall] = {}
    assistant_texts = user_texts = tool_responses = chars = 0
    turn = -1
    for position, message in enumerate(messages):
        where = f"messages[{position}]"
        _expect(message, dict, where, file=file, line=line)
        kind = message.get("T")
        meta = (
            _expect(message.get("metadata"), dict, f"{where}.metadata", file=file, line=line, optional=True)
            or {}
        )
        if kind == "Text":
            role = message.get("role")
            if role not in ("system", "user", "assistant"):
                raise ThinkingBoxFormatError(f"{where}: unknown Text role {role!r}", file=file, line=line)
            content = _expect(message.get("content") or "", str, f"{where}.content", file=file, line=line)
            chars += len(content)
            if role == "user":
                turn += 1
                user_texts += 1
            if role == "assistant":
                assistant_texts += 1
            if meta.get("tag") == "think":
                reasoning.append((len(transcript.messages), content))  # hidden from the user and from rubrics
                continue
            transcript.messages.append(Message(role=role, content=content, turn=max(turn, 0)))
            tags.append(meta.get("tag"))
        elif kind in ("ParallelToolCall", "ToolCall"):
            requests = message.get("tool_calls") if kind == "ParallelToolCall" else [message]
            _expect(requests, list, f"{where}.tool_calls", file=file, line=line)
            assistant = Message(role="assistant", turn=max(turn, 0))
            for offset, request in enumerate(requests):
                _expect(request, dict, f"{where}.tool_calls[{offset}]", file=file, line=line)
                name = _expect(
                    request.get("name"), str, f"{where}.tool_calls[{offset}].name", file=file, line=line
                )
                call_id = str(request.get("id") or f"call_{len(transcript.tool_calls)}")
                # A mapping, or the text the agent wrote when it was not valid JSON (as our runner keeps it).
                arguments = _expect(
                    request.get("arguments"),
                    (dict, str),
                    f"{where}.tool_calls[{offset}].arguments",
                    file=file,
                    line=line,
                    optional=True,
                )
                call_meta = (
                    _expect(
                        request.get("metadata"),
                        dict,
                        f"{where}.tool_calls[{offset}].metadata",
                        file=file,
                        line=line,
                        optional=True,
                    )
                    or {}
                )
                assistant.tool_calls.append(ToolCallRequest(id=call_id, name=name, arguments=arguments))
                call = ToolCall(
                    index=len(transcript.tool_calls),
                    id=call_id,
                    name=name,
                    arguments=arguments,
                    error=call_meta.get("error"),
                    turn=max(turn, 0),
                )
                transcript.tool_calls.append(call)
                calls_by_id[call_id] = call
            transcript.messages.append(assistant)
            tags.append(None)
        elif kind == "ToolResponse":
            tool_responses += 1  # tb agg counts answered calls: two calls in one message are two,
            # an end-turn call nobody answered is none
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            answered = calls_by_id.get(str(message.get("id")))
            error = _tool_error(text)
            if answered is not None:
                answered.result = _maybe_json(text)
                answered.error = answered.error or error
            transcript.messages.append(
                Message(
                    role="tool",
                    content=text,
                    tool_call_id=message.get("id"),
                    name=message.get("name"),
                    turn=max(turn, 0),
                    is_error=bool(error or (answered and answered.error)),
                )
            )
            tags.append(None)
        else:
            raise ThinkingBoxFormatError(f"{where}: unknown message kind T={kind!r}", file=file, line=line)
    stats = TbRowStats(
        assistant_texts=assistant_texts,
        user_texts=user_texts,
        tool_responses=tool_responses,
        char_length=chars,
    )
    return transcript, tuple(tags), tuple(reasoning), stats


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text


def _tool_error(text: str) -> str | None:
    """The error of a ThinkingBox tool result: tool failures come back as ``{"error": …, "tool": …}``."""
    parsed = _maybe_json(text)
    if isinstance(parsed, dict) and parsed.get("error"):
        return str(parsed["error"])
    return None


def _effects(
    test_context: Any, *, file: str, line: int
) -> tuple[dict[str, EffectsComparison], dict[str, Any]]:
    if test_context is None:
        return {}, {}
    _expect(test_context, dict, "test_context", file=file, line=line)
    effects = _expect(test_context.get("effects") or {}, dict, "test_context.effects", file=file, line=line)
    compared: dict[str, EffectsComparison] = {}
    raw: dict[str, Any] = {}
    for server, answer in effects.items():
        if is_db_effects(answer):
            try:
                compared[server] = compare_effects(server, answer)
            except ThinkingBoxFormatError as exc:
                raise ThinkingBoxFormatError(
                    f"test_context.effects.{server}: {exc.message}", file=file, line=line
                ) from exc
        else:
            raw[server] = answer
    return compared, raw
