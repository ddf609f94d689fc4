"""Whether a ThinkingBox server package was installed with its seed data.

Each toolset of a ThinkingBox server package is a folder holding ``tools/``, ``models.py`` and
``initial_data/*.json``: the rows the server loads at ``__reserved__init`` before a task's
``data_patch``. The JSON files are not Python packages, so a regular ``pip install`` leaves them
behind; the servers then start and answer as if every table were empty (a missing data folder is
skipped without a word), and every golden trajectory fails. Validating a suite on such servers would
mark every task invalid, so validation asks first: the probe runs in the servers' own interpreter
(they live in a venv of their own) and looks at the package the launch command runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence

PROBE_TIMEOUT_S = 60.0

# Run by the servers' interpreter: where the package is, its toolset folders and their seed files.
_PROBE = """
import importlib.util, json, pathlib, sys
spec = importlib.util.find_spec(sys.argv[1])
if spec is None or not spec.submodule_search_locations:
    print(json.dumps(None)); raise SystemExit
root = pathlib.Path(list(spec.submodule_search_locations)[0])
toolsets = sorted(str(p.parent) for p in root.rglob("tools") if p.is_dir() and (p.parent / "models.py").is_file())
print(json.dumps({"folder": str(root), "toolsets": toolsets, "seed_files": len(list(root.rglob("initial_data/*.json")))}))
"""


def served_package(args: Sequence[str]) -> str:
    """The top-level package a ``python -m <package>.<module>`` launch runs ('' for any other launch)."""
    args = list(args)
    if "-m" not in args or args.index("-m") + 1 >= len(args):
        return ""
    return args[args.index("-m") + 1].split(".")[0]


def seed_data_problem(
    *, command: str, args: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None
) -> str:
    """'' when the server package a launch config runs ships its seed data (or is not a ThinkingBox
    toolset package, or cannot be probed: the validation reports that itself), else a sentence
    naming the package's folder and a seed-data folder that is missing."""
    package = served_package(args)
    if not command or not package:
        return ""
    try:
        done = subprocess.run(
            [command, "-c", _PROBE, package],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env={**os.environ, **(env or {})},
            cwd=cwd or None,
        )
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return ""
    if not isinstance(found, dict) or not found.get("toolsets") or found.get("seed_files"):
        return ""
    return (
        f"the ThinkingBox servers were installed without their seed data: package {package} "
        f"({found['folder']}, run by {command}) holds no initial_data/*.json, e.g. "
        f"{os.path.join(found['toolsets'][0], 'initial_data')} is missing or empty; a regular pip install "
        "leaves these folders behind, so install the package editable from a copy of its source"
    )
