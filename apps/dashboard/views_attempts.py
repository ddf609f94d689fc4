"""Attempt drilldown: transcript on the left, state diff / checks / verdict on the right.

The stored result is read once, as the engine's typed AttemptResult (apps.attempts.selectors.results);
the helpers below turn it into the plain values the templates show.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.attempts.selectors.drilldown import (
    attempt_neighbours,
    raw_result_attempts,
    visible_drilldown_attempt,
)
from apps.attempts.selectors.process_risk import process_findings_of
from apps.attempts.selectors.results import StoredResultError, attempt_result
from apps.campaigns.selectors import diff_headline
from apps.core.access import get_visible_or_404, require_role
from apps.core.roles import Role
from apps.regrade.selectors import verdict_history
from tb_engine.faults import faults_of
from tb_engine.results import AttemptResult, DiffItem
from tb_engine.transcript import Transcript

KIND_LABELS = {"missing_effect": "missing", "extra_effect": "extra", "wrong_value": "wrong value"}
POSITIONAL_SHOWN = 200  # the server's positional diff can run to thousands of items


def thinkingbox_evidence(result: AttemptResult | None) -> dict:
    """What the ThinkingBox adapter recorded about the attempt ({} for our own runs and unfinished ones)."""
    return (result.extra.get("thinkingbox") or {}) if result is not None else {}


def state_verdicts(result: AttemptResult | None) -> list[dict]:
    """Per server of a ThinkingBox attempt: our state verdict, its hash verdict, which decided, its own diff."""
    evidence = thinkingbox_evidence(result)
    of_record = evidence.get("verdict_of_record") == "server hash"
    servers = []
    for name, server in sorted((evidence.get("effects") or {}).items()):
        if not isinstance(server, dict) or "their_hash_pass" not in server:
            continue
        positional = list(server.get("positional_diff") or [])
        servers.append(
            {
                "name": name,
                "our_state_pass": bool(server.get("our_state_pass")),
                "their_hash_pass": bool(server.get("their_hash_pass")),
                "disagree": bool(server.get("disagree")),
                "of_record": of_record,
                "diff_items": server.get("diff_items", 0),
                "declarations": server.get("declarations", ""),
                "declarations_verified": server.get("declarations_verified"),
                "positional": [p for p in positional[:POSITIONAL_SHOWN] if isinstance(p, dict)],
                "positional_total": len(positional),
                "positional_more": len(positional) > POSITIONAL_SHOWN,
            }
        )
    return servers


def diff_groups(diff: list[DiffItem]) -> list[dict]:
    """Diff items grouped by table, then row key, each with its headline and writer call indexes."""
    tables: dict[str, dict[str, list[dict]]] = {}
    for position, item in enumerate(diff):
        entry = {
            **item.to_dict(),
            "position": position,
            "headline": diff_headline(item.to_dict()),
            "kind_label": KIND_LABELS.get(item.kind, item.kind),
            "calls": " ".join(str(i) for i in item.written_by),
        }
        tables.setdefault(item.table, {}).setdefault(str(item.key), []).append(entry)
    return [
        {"table": table, "rows": [{"key": key, "items": items} for key, items in rows.items()]}
        for table, rows in sorted(tables.items())
    ]


def fault_markers(faults: Mapping[str, Any] | None) -> dict[int, dict]:
    """Call index -> what the attempt's fault plan did there (tb_engine.faults record): the injected
    fault (kind, whether the call's effect was committed) and, on a later call that repeated a
    faulted one and left a duplicate effect, which faulted call it repeated."""
    markers: dict[int, dict] = {}
    if not faults:
        return markers
    duplicated = {int(d["call"]) for d in faults.get("duplicate_effects") or () if "call" in d}
    for fault in faults.get("fired") or ():
        index = int(fault["call"])
        markers[index] = {
            "kind": str(fault.get("kind", "")),
            "label": str(fault.get("kind", "")).replace("_", " "),
            "committed": bool(fault.get("committed")),
            "detail": str(fault.get("detail", "")),
            "duplicate": index in duplicated,
        }
    for effect in faults.get("duplicate_effects") or ():
        for repeat in effect.get("repeats") or ():
            markers.setdefault(int(repeat), {"repeat_of": int(effect["call"]), "duplicate": True})
    return markers


def transcript_steps(
    transcript: Transcript, diff: list[DiffItem], faults: Mapping[str, Any] | None = None
) -> list[dict]:
    """Messages in order, with each requested tool call replaced by its executed record (a ToolCall:
    result, error, timing) and the fault injected into it, if any (``fault_markers``)."""
    executed = {call.id: call for call in transcript.tool_calls}
    markers = fault_markers(faults)
    writes: dict[int, list[int]] = {}
    for position, item in enumerate(diff):
        for index in item.written_by:
            writes.setdefault(index, []).append(position)
    shown: set[str] = set()
    steps: list[dict] = []
    for message in transcript.messages:
        if message.role == "tool" and message.tool_call_id in executed:
            continue  # its content is the result of a call already shown with that call
        if message.content or message.role != "assistant":
            steps.append(
                {
                    "kind": "message",
                    "role": message.role,
                    "content": message.content,
                    "turn": message.turn,
                    "at_ms": message.at_ms,
                    "is_error": message.is_error,
                }
            )
        for request in message.tool_calls:
            call = executed.get(request.id)
            if call is None:
                steps.append({"kind": "unexecuted", "name": request.name, "arguments": request.arguments})
                continue
            shown.add(call.id)
            steps.append(
                {
                    "kind": "call",
                    "call": call,
                    "diff_items": " ".join(str(p) for p in writes.get(call.index, [])),
                    "fault": markers.get(call.index),
                }
            )
    # Calls no message announced (e.g. imported transcripts) still appear, in index order.
    for call in sorted(transcript.tool_calls, key=lambda c: c.index):
        if call.id not in shown:
            steps.append(
                {
                    "kind": "call",
                    "call": call,
                    "diff_items": " ".join(str(p) for p in writes.get(call.index, [])),
                    "fault": markers.get(call.index),
                }
            )
    return steps


def imported_check(result: AttemptResult | None) -> dict | None:
    """ThinkingBox's own test outcome of an attempt imported from ``tb infer`` (None for our own runs).

    Keys: passed, line, code, message (the exception line: the assert's text or the hash
    mismatch), traceback, judge (the judge's motivation), all from ``extra.thinkingbox.failure``.
    """
    evidence = thinkingbox_evidence(result)
    if result is None or "finish_reason" not in evidence:  # only imported rows carry tb infer's finish reason
        return None
    failure = evidence.get("failure") or {}
    traceback = str(failure.get("tb") or "")
    message = failure.get("message") or next(
        (line.strip() for line in reversed(traceback.splitlines()) if line.strip()), ""
    )
    return {
        "passed": result.verdict == "pass",
        "line": failure.get("lineno"),
        "code": str(failure.get("line_content") or "").strip(),
        "message": message,
        "traceback": traceback,
        "judge": failure.get("judge_motivation") or "",
    }


def empty_diff_note(result: AttemptResult | None, imported: dict | None) -> str:
    """What the diff pane says when it has no item: 'no difference' only when that is known and the attempt passed."""
    if result is None or result.status != "done":
        return "No state diff: the attempt did not finish."
    evidence = thinkingbox_evidence(result)
    if result.verdict == "pass":
        if imported is not None and not evidence.get("effects"):
            # Nothing was compared: "no difference" would claim a comparison that never happened.
            return (
                "No state diff: the imported row carries no effects (tb infer ran without --dump); "
                "ThinkingBox's own check below decided the pass."
            )
        return "No difference from the golden end state."
    if imported is not None and not evidence.get("effects"):
        if evidence.get("raw_effects"):
            return (
                "No state diff: this server's effects are not a database state (kept raw in the JSON); "
                "ThinkingBox's own check below decided the failure."
            )
        return (
            "No state diff: the imported row carries no effects (tb infer ran without --dump); "
            "ThinkingBox's own check below decided the failure."
        )
    where = "ThinkingBox's own check below" if imported is not None else "the checks or rubrics below"
    return f"The end state matches the golden end state (our diff); the attempt failed on {where}."


def superseded_note(runs: list[dict]) -> dict | None:
    """The attempt's superseded runs (infra errors re-run) summed for its page; None when it had none.

    Tokens and cost cover the agent and the evaluation overhead: everything those runs billed.
    The cost is None (unpriced) when a run with tokens was unpriced.
    """
    if not runs:
        return None
    shown = []
    for run in runs:
        tokens = sum(int(run.get(name) or 0) for name in ("input_tokens", "output_tokens", "eval_tokens"))
        costs = [run.get(name) for name in ("agent_cost", "eval_cost")]
        agent_tokens = int(run.get("input_tokens") or 0) + int(run.get("output_tokens") or 0)
        unpriced = (costs[0] is None and agent_tokens) or (costs[1] is None and run.get("eval_tokens"))
        cost = None if unpriced else sum((Decimal(c) for c in costs if c is not None), Decimal(0))
        shown.append({**run, "tokens": tokens, "cost": cost})
    unpriced_total = any(run["cost"] is None for run in shown)
    return {
        "count": len(shown),
        "tokens": sum(run["tokens"] for run in shown),
        "cost": None if unpriced_total else sum((run["cost"] for run in shown), Decimal(0)),
        "runs": shown,
    }


@require_GET
@require_role(Role.VIEWER)
def attempt_detail(request, pk: int):
    """The drilldown of one attempt of a visible campaign (404 for everyone else)."""
    attempt = visible_drilldown_attempt(user=request.user, pk=pk)
    if attempt is None:  # outsiders get the same 404 as for a missing attempt
        raise Http404("no such attempt in your campaigns")
    try:
        result = attempt_result(attempt)  # None until the attempt has a result (queued, running, cancelled)
        result_error = ""
    except StoredResultError as error:
        # A result this version cannot read is shown as such (the row's columns still are), never guessed at.
        result, result_error = None, error.message
    diff = result.diff if result is not None else []
    previous_id, next_id = attempt_neighbours(attempt=attempt)
    imported = imported_check(result)
    context = {
        "attempt": attempt,
        "campaign": attempt.campaign,
        "task": attempt.task,
        "steps": transcript_steps(result.transcript, diff, faults_of(result.extra))
        if result is not None
        else [],
        "faults": faults_of(result.extra) if result is not None else None,
        "groups": diff_groups(diff),
        "headlines": [diff_headline(item.to_dict()) for item in diff[:3]],
        "checks": result.checks if result is not None else [],
        "rubrics": result.rubrics if result is not None else [],
        # The tool server's start-up evidence (adapter-defined, free-form): None for sandbox runs.
        "backend": result.extra.get("backend") if result is not None else None,
        "state_verdicts": state_verdicts(result),
        "imported_check": imported,
        "empty_diff_note": empty_diff_note(result, imported),
        "previous_id": previous_id,
        "next_id": next_id,
        "superseded": superseded_note(attempt.superseded_runs),
        "result_error": result_error,
        # Process findings never change the verdict: shown beside it (docs/process_risk.md).
        "process": process_findings_of(attempt),
        # Verdicts this attempt had before a re-grade, and previews not applied yet (issue 29).
        "verdict_versions": verdict_history(attempt_id=attempt.pk),
    }
    return render(request, "dashboard/attempt.html", context)


@require_GET
@require_role(Role.VIEWER)
def attempt_raw(request, pk: int):
    """The stored AttemptResult JSON as a download."""
    attempt = get_visible_or_404(raw_result_attempts(), request.user, pk=pk)
    response = HttpResponse(
        json.dumps(attempt.result, indent=2, sort_keys=True), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="attempt-{attempt.pk}.json"'
    return response
