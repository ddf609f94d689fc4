"""What a ThinkingBox server leaves out of its state hash, read from the server's own declarations.

The sandbox servers hash their state without the fields their pydantic models mark with
``UnstableField`` (and, for models with ``unstable_extra_fields``, without every field outside
the model's schema). Our classified diff must ignore exactly those fields and no others, or our
verdict and the server's disagree (a clock stamp we skip but the server hashes lets a do-nothing
agent pass where the server fails it). So the unstable fields are never a table kept by hand:

1. ``declarations_probe.py`` (standard library only) runs with the *servers'* interpreter,
   imports the server module and prints, per table, what the server's own markers declare;
2. the answer is cached on disk under the server package's content hash (SHA-256 over its
   files), and in memory per launch command, so a worker probes each server once;
3. a server that sends its declarations in the geteffects answer (key ``unstable``, as
   ``tb_engine.mcp_server`` does) is believed directly.

``ServerDeclarations.state_hash`` recomputes the server's hash from a state dump under the
declarations (the servers' algorithm: unstable fields removed, lists of primitives sorted, rows
sorted by ``id``, canonical JSON, SHA-256). Matching the hashes the server reported proves the
declarations were read right; the comparison records the outcome with every attempt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tb_engine.interfaces import InfraError

PROBE = Path(__file__).with_name("declarations_probe.py")
PROBE_TIMEOUT_S = 180.0
CACHE_ENV = "TB_DECLARATIONS_CACHE"
CACHE_FORMAT = 1  # bumped when the cached shape changes


@dataclass(frozen=True)
class TableDeclaration:
    """One table's hash rule: named unstable fields, and whether fields outside the schema are unstable."""

    unstable: frozenset[str] = frozenset()
    schema_fields: frozenset[str] = frozenset()
    unstable_extra_fields: bool = False

    def unstable_columns(self, columns: Iterable[str]) -> frozenset[str]:
        """The columns of ``columns`` the server leaves out of its hash."""
        present = set(columns)
        unstable = set(self.unstable) & present
        if self.unstable_extra_fields:
            unstable |= present - set(self.schema_fields)
        return frozenset(unstable)

    def stable_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in row.items() if k not in self.unstable_columns(row)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "unstable": sorted(self.unstable),
            "schema_fields": sorted(self.schema_fields),
            "unstable_extra_fields": self.unstable_extra_fields,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableDeclaration:
        return cls(
            unstable=frozenset(data.get("unstable") or ()),
            schema_fields=frozenset(data.get("schema_fields") or ()),
            unstable_extra_fields=bool(data.get("unstable_extra_fields")),
        )


@dataclass(frozen=True)
class ServerDeclarations:
    """Per-table hash rules of one server and where they were read (``source``, shown with verdicts)."""

    tables: Mapping[str, TableDeclaration] = field(default_factory=dict)
    source: str = "none: no declarations available (every field counts)"
    package_hash: str = ""

    @property
    def found(self) -> bool:
        return bool(self.tables)

    def unstable_columns(self, table: str, columns: Iterable[str]) -> frozenset[str]:
        declared = self.tables.get(table)
        return declared.unstable_columns(columns) if declared is not None else frozenset()

    def with_extra(self, extra: Mapping[str, Iterable[str]] | None, origin: str) -> ServerDeclarations:
        """These declarations plus fields a domain declares unstable itself (``DomainSpec.mcp["unstable"]``)."""
        if not extra:
            return self
        tables = dict(self.tables)
        for table, names in extra.items():
            base = tables.get(table, TableDeclaration())
            tables[table] = TableDeclaration(
                base.unstable | frozenset(names), base.schema_fields, base.unstable_extra_fields
            )
        return ServerDeclarations(tables, f"{self.source}; plus {origin}", self.package_hash)

    def merged(self, other: ServerDeclarations) -> ServerDeclarations:
        """Both sets of rules: a field either names unstable is unstable."""
        tables = dict(self.tables)
        for table, theirs in other.tables.items():
            ours = tables.get(table)
            tables[table] = (
                theirs
                if ours is None
                else TableDeclaration(
                    ours.unstable | theirs.unstable,
                    ours.schema_fields | theirs.schema_fields,
                    ours.unstable_extra_fields or theirs.unstable_extra_fields,
                )
            )
        return ServerDeclarations(tables, f"{self.source}; plus {other.source}", self.package_hash)

    def stable_state(
        self, state: Mapping[str, list[dict[str, Any]] | None]
    ) -> dict[str, list[dict[str, Any]]]:
        """The state as the server hashes it (see the module docstring)."""
        stable: dict[str, list[dict[str, Any]]] = {}
        for table, rows in state.items():
            declared = self.tables.get(table, TableDeclaration())
            cleaned = [_sort_primitive_lists(declared.stable_row(row)) for row in rows or []]
            cleaned.sort(key=lambda row: str(row.get("id", "")))  # stable: ties keep stored order
            stable[table] = cleaned
        return stable

    def state_hash(self, state: Mapping[str, list[dict[str, Any]] | None]) -> str:
        """SHA-256 of the stable state, as the server computes its result/golden hash."""
        text = json.dumps(self.stable_state(state), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": CACHE_FORMAT,
            "source": self.source,
            "package_hash": self.package_hash,
            "tables": {name: t.to_dict() for name, t in sorted(self.tables.items())},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerDeclarations:
        return cls(
            tables={name: TableDeclaration.from_dict(t) for name, t in (data.get("tables") or {}).items()},
            source=str(data.get("source") or ""),
            package_hash=str(data.get("package_hash") or ""),
        )


NO_DECLARATIONS = ServerDeclarations()


def _sort_primitive_lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sort_primitive_lists(item) for key, item in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(item, (str, int, float, bool)) for item in value):
            return sorted(value)
        return [_sort_primitive_lists(item) for item in value]
    return value


def from_effects_answer(answer: Mapping[str, Any]) -> ServerDeclarations | None:
    """Declarations a server sends itself in its geteffects answer (``unstable: {table: [field…]}``)."""
    declared = answer.get("unstable")
    if not isinstance(declared, dict):
        return None
    tables = {
        str(table): TableDeclaration(unstable=frozenset(str(f) for f in names or ()))
        for table, names in declared.items()
    }
    return ServerDeclarations(tables, "the server's geteffects answer (key 'unstable')")


# --- Probing a server module with its own interpreter --------------------------------------


def probe_target(command: str, args: Iterable[str] = ()) -> tuple[str, str] | None:
    """(interpreter, module) for a launch command of the form ``<python> -m <module>``, else None."""
    parts = [*shlex.split(command), *args] if command and not args else [command, *args]
    parts = [p for p in parts if p]
    if len(parts) >= 3 and "-m" in parts[1:-1]:
        module = parts[parts.index("-m", 1) + 1]
        return parts[0], module
    return None


def default_cache_dir() -> Path:
    """``$TB_DECLARATIONS_CACHE``, else ``$XDG_CACHE_HOME``/``~/.cache`` ``/tb_engine/server-declarations``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tb_engine" / "server-declarations"


_memo: dict[str, ServerDeclarations] = {}
_memo_lock = threading.Lock()
_probe_locks: dict[str, threading.Lock] = {}


def _run_probe(python: str, mode: str, module: str, env: Mapping[str, str] | None, cwd: str | None) -> dict:
    full_env = {**os.environ, **(env or {})}
    try:
        done = subprocess.run(
            [python, str(PROBE), mode, module],
            env=full_env,
            cwd=cwd or None,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"could not read the declarations of {module} with {python}: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stderr or "").strip().splitlines()[-15:])
        raise InfraError(
            f"could not read the declarations of {module} with {python} (exit {done.returncode}): {tail}"
        )
    try:
        answer = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise InfraError(f"declarations probe for {module} printed no JSON: {done.stdout[-300:]!r}") from exc
    if not isinstance(answer, dict):
        raise InfraError(f"declarations probe for {module} printed {type(answer).__name__}, not an object")
    return answer


def _cache_file(cache_dir: Path, python: str, module: str, package_hash: str) -> Path:
    # The interpreter is part of the key: another pydantic may resolve the same markers differently.
    key = hashlib.sha256(f"{CACHE_FORMAT}|{python}|{module}|{package_hash}".encode()).hexdigest()[:32]
    return cache_dir / f"{module}-{key}.json"


def _read_cache(path: Path) -> ServerDeclarations | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        return None
    return ServerDeclarations.from_dict(data)


def _write_cache(path: Path, declarations: ServerDeclarations) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
            json.dump(declarations.to_dict(), handle, sort_keys=True)
        os.replace(handle.name, path)
    except OSError:
        pass  # a read-only cache only costs a re-probe next time


def server_declarations(
    python: str,
    module: str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    cache_dir: Path | None = None,
) -> ServerDeclarations:
    """The declarations of server ``module`` as ``python`` imports it (probed once per package version).

    Raises InfraError when the interpreter cannot import the module (the server could not start either).
    """
    memo_key = json.dumps([python, module, sorted((env or {}).items()), cwd])
    with _memo_lock:
        if memo_key in _memo:
            return _memo[memo_key]
        lock = _probe_locks.setdefault(memo_key, threading.Lock())
    with lock:  # one probe per server at a time; the others wait for its answer
        with _memo_lock:
            if memo_key in _memo:
                return _memo[memo_key]
        cache_dir = cache_dir or default_cache_dir()
        package_hash = str(_run_probe(python, "hash", module, env, cwd).get("package_hash") or "")
        path = _cache_file(cache_dir, python, module, package_hash)
        declarations = _read_cache(path) if package_hash else None
        if declarations is None:
            answer = _run_probe(python, "declare", module, env, cwd)
            tables = {name: TableDeclaration.from_dict(t) for name, t in (answer.get("tables") or {}).items()}
            package = answer.get("package") or module
            source = (
                f"declarations of {module} (UnstableField / unstable_extra_fields), read with {python}; "
                f"package {package} sha256 {package_hash[:12]}"
                if tables
                else f"none: {module} declares no sandbox models (every field counts)"
            )
            declarations = ServerDeclarations(tables, source, package_hash)
            if package_hash:
                _write_cache(path, declarations)
        with _memo_lock:
            _memo[memo_key] = declarations
        return declarations


def declarations_for_launch(
    command: str, args: Iterable[str] = (), *, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> ServerDeclarations:
    """The declarations of the server a stdio launch command starts; none for other launch forms."""
    target = probe_target(command, args)
    if target is None:
        return ServerDeclarations(source=f"none: launch command {command!r} is not '<python> -m <module>'")
    return server_declarations(target[0], target[1], env=env, cwd=cwd)


def forget_memo() -> None:
    """Drop the in-memory answers (tests; a process that upgraded its servers)."""
    with _memo_lock:
        _memo.clear()
        _probe_locks.clear()
