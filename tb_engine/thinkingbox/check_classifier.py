"""Recognise what a ThinkingBox test function checks, from its syntax tree (never executed).

A *standard* test body only calls module helpers of two known shapes:

* state-hash check: reads ``x.effects[<server>]["result_db_hash"]`` and ``["golden_db_hash"]``
  and fails (``assert False``) when they differ, optionally formatting the positional diff;
* yes/no rubric check: loops over ``x.effects[<server>].get("rubrics_yesno")`` asserting
  ``judge.text_yesno(x.response, rubric)``.

Such a task is fully described by its golden trajectory plus rubrics, so we grade it with our
state diff. Anything else (extra assertions, other effects keys, arbitrary code) is reported as
``custom_unsupported`` and never silently graded.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

STATE_HASH = "state_hash"
RUBRICS_YESNO = "rubrics_yesno"

# Calls a standard helper may make besides its own data access: building the failure message.
_HARMLESS_CALL_NAMES = frozenset({"len", "enumerate", "str", "repr"})
_HARMLESS_CALL_ATTRS = frozenset({"get", "dumps"})


@dataclass(frozen=True)
class BodyVerdict:
    """What a test body checks: the helper kinds it calls, or why it is not a standard body."""

    kinds: frozenset[str]
    reason: str = ""  # non-empty: the body is custom (not a standard state check)

    @property
    def standard(self) -> bool:
        return not self.reason and STATE_HASH in self.kinds


def module_constants(tree: ast.Module) -> dict[str, str]:
    """Top-level ``NAME = "text"`` assignments (e.g. ``SERVER_NAME``)."""
    constants: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = node.value.value
    return constants


def _effects_servers(node: ast.AST, constants: dict[str, str]) -> set[str]:
    """Server names used as ``x.effects[<server>]`` anywhere below ``node`` ('?' when not a constant)."""
    servers: set[str] = set()
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Subscript)
            and isinstance(sub.value, ast.Attribute)
            and sub.value.attr == "effects"
        ):
            key = sub.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                servers.add(key.value)
            elif isinstance(key, ast.Name) and key.id in constants:
                servers.add(constants[key.id])
            else:
                servers.add("?")
    return servers


def _string_keys(node: ast.AST) -> set[str]:
    """String constants used as subscripts or as the first argument of ``.get``."""
    keys: set[str] = set()
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Subscript)
            and isinstance(sub.slice, ast.Constant)
            and isinstance(sub.slice.value, str)
        ):
            keys.add(sub.slice.value)
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == "get"
            and sub.args
            and isinstance(sub.args[0], ast.Constant)
            and isinstance(sub.args[0].value, str)
        ):
            keys.add(sub.args[0].value)
    return keys


def _only_harmless_calls(node: ast.AST, allowed_attrs: frozenset[str] = _HARMLESS_CALL_ATTRS) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            if isinstance(func, ast.Name) and func.id in _HARMLESS_CALL_NAMES:
                continue
            if isinstance(func, ast.Attribute) and func.attr in allowed_attrs:
                continue
            return False
    return True


def _is_state_hash_helper(func: ast.FunctionDef) -> bool:
    body = func.body
    assigns = [s for s in body if isinstance(s, ast.Assign)]
    ifs = [s for s in body if isinstance(s, ast.If)]
    if len(body) != len(assigns) + len(ifs) or len(ifs) != 1 or len(assigns) != 2:
        return False
    test = ifs[0].test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq)):
        return False
    last = ifs[0].body[-1]
    fails = isinstance(last, ast.Assert) and isinstance(last.test, ast.Constant) and last.test.value is False
    keys = _string_keys(func)
    return fails and {"result_db_hash", "golden_db_hash"} <= keys and _only_harmless_calls(func)


def _is_rubric_helper(func: ast.FunctionDef) -> bool:
    body = func.body
    if len(body) != 2 or not isinstance(body[0], ast.Assign) or not isinstance(body[1], ast.For):
        return False
    loop = body[1]
    if len(loop.body) != 1 or not isinstance(loop.body[0], ast.Assert):
        return False
    call = loop.body[0].test
    asks_judge = (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "text_yesno"
    )
    return (
        asks_judge
        and "rubrics_yesno" in _string_keys(body[0])
        and _only_harmless_calls(func, _HARMLESS_CALL_ATTRS | {"text_yesno"})
    )


def classify_helpers(tree: ast.Module, server: str) -> dict[str, str]:
    """Module-level non-test functions of a known standard shape -> their kind."""
    constants = module_constants(tree)
    kinds: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("test"):
            continue
        if _effects_servers(node, constants) != {server}:
            continue
        if _is_state_hash_helper(node):
            kinds[node.name] = STATE_HASH
        elif _is_rubric_helper(node):
            kinds[node.name] = RUBRICS_YESNO
    return kinds


def classify_test_body(func: ast.FunctionDef, helpers: dict[str, str]) -> BodyVerdict:
    """Decide whether a test function is a standard state check (see module docstring)."""
    statements = func.body
    if statements and isinstance(statements[0], ast.Expr) and isinstance(statements[0].value, ast.Constant):
        statements = statements[1:]  # the YAML docstring
    params = {a.arg for a in func.args.args}
    kinds: set[str] = set()
    for statement in statements:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            return BodyVerdict(
                frozenset(kinds), f"line {statement.lineno}: statement is not a call to a check helper"
            )
        kind = helpers.get(call.func.id)
        if kind is None:
            return BodyVerdict(
                frozenset(kinds), f"line {statement.lineno}: {call.func.id}() is not a standard check helper"
            )
        if call.keywords or not all(isinstance(a, ast.Name) and a.id in params for a in call.args):
            return BodyVerdict(
                frozenset(kinds),
                f"line {statement.lineno}: {call.func.id}() called with non-standard arguments",
            )
        kinds.add(kind)
    if STATE_HASH not in kinds:
        return BodyVerdict(frozenset(kinds), "the body never checks the state hash")
    return BodyVerdict(frozenset(kinds))
