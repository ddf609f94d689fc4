"""Read what a ThinkingBox tool server hashes, from the server's own declarations.

Run as a script with the SERVERS' interpreter (never imported into our process: the servers use
another major version of the mcp SDK):

    <servers python> declarations_probe.py hash MODULE      -> {"package": …, "package_hash": …}
    <servers python> declarations_probe.py declare MODULE   -> the above plus "tables"

Standard library only on our side; ``declare`` imports the server module (which builds its
``SandboxToolsSystem`` on import) and asks the server package's own ``UnstableField`` /
``UnstableExtraFields`` markers about every model class its database registers, exactly as the
server's ``get_stable_database_state`` does before hashing. Output, one JSON object on stdout:

    tables: {stem: {"unstable": [field…], "schema_fields": [field…], "unstable_extra_fields": bool}}

``hash`` is cheap (no server import): a SHA-256 over the files of the module's top-level package,
which is what the caller caches the declarations under.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import io
import json
import os
import sys
from contextlib import redirect_stdout
from typing import Any

HASHED_SUFFIXES = (".py", ".json", ".yaml", ".yml", ".toml", ".txt", ".md")


def package_location(module: str) -> tuple[str, str]:
    """(top-level package name, its folder or file) without importing it."""
    top = module.split(".")[0]
    spec = importlib.util.find_spec(top)
    if spec is None:
        raise SystemExit(f"cannot find module {top!r} with {sys.executable}")
    if spec.submodule_search_locations:
        return top, list(spec.submodule_search_locations)[0]
    return top, str(spec.origin or "")


def package_hash(location: str) -> str:
    """SHA-256 over the relative paths and contents of the package's source and data files."""
    digest = hashlib.sha256()
    if os.path.isfile(location):
        with open(location, "rb") as handle:
            digest.update(handle.read())
        return digest.hexdigest()
    for folder, dirs, files in os.walk(location):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(HASHED_SUFFIXES):
                continue
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, location).encode())
            digest.update(b"\0")
            with open(path, "rb") as handle:
                digest.update(handle.read())
            digest.update(b"\0")
    return digest.hexdigest()


def _markers() -> tuple[Any, Any] | None:
    """The server package's UnstableField and UnstableExtraFields classes, wherever it defines them."""
    for mod in list(sys.modules.values()):
        field_marker = getattr(mod, "UnstableField", None)
        extra_marker = getattr(mod, "UnstableExtraFields", None)
        if hasattr(field_marker, "extract_names") and hasattr(extra_marker, "has_unstable_extras"):
            return field_marker, extra_marker
    return None


def _databases(server: Any) -> list[Any]:
    """The in-memory databases a server module holds (its SandboxToolsSystem instances' ``db``)."""
    found = []
    for value in list(vars(server).values()):
        db = getattr(value, "db", None)
        if db is not None and isinstance(getattr(db, "_model_cls_to_stem", None), dict):
            found.append(db)
    return found


def declarations(module: str) -> dict[str, Any]:
    """Per-table unstable fields as the server's own markers declare them."""
    with redirect_stdout(io.StringIO()):  # a server may print while it builds its tools
        server = importlib.import_module(module)
    markers = _markers()
    tables: dict[str, Any] = {}
    if markers is None:
        return {"tables": tables, "found": False}
    field_marker, extra_marker = markers
    for db in _databases(server):
        for model_cls, stem in db._model_cls_to_stem.items():
            tables[stem] = {
                "unstable": sorted(field_marker.extract_names(model_cls)),
                "schema_fields": sorted(getattr(model_cls, "model_fields", {}) or {}),
                "unstable_extra_fields": bool(extra_marker.has_unstable_extras(model_cls)),
            }
    return {"tables": tables, "found": bool(tables)}


def main(argv: list[str]) -> int:
    # Import as ``python -m`` would: from the working folder, never from this script's folder
    # (whose module names, e.g. results.py, must not shadow the server's).
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, os.getcwd())
    if len(argv) != 3 or argv[1] not in ("hash", "declare"):
        print("usage: declarations_probe.py hash|declare MODULE", file=sys.stderr)
        return 2
    mode, module = argv[1], argv[2]
    top, location = package_location(module)
    answer: dict[str, Any] = {"module": module, "package": top, "package_hash": package_hash(location)}
    if mode == "declare":
        answer.update(declarations(module))
    sys.stdout.write(json.dumps(answer, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
