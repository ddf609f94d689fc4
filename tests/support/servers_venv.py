"""The real ThinkingBox MCP servers' interpreter, for tests, CI and benchmarks.

The servers (``../shared/thinkingbox/servers``) run in a virtual environment of their own: they
need ``fastmcp>=3,<4`` and ``mcp<2`` (a different mcp major version than ours; without both bounds
pip resolves versions the servers crash on). ``servers_python()`` returns its ``python``:

1. ``TB_SERVERS_PYTHON`` when set (checked: it must import the benchmark servers' package);
2. else a venv built under a cache folder (``TB_SERVERS_CACHE``, default
   ``~/.cache/thinkingbox-web/servers``) from a temporary copy of the servers folder — an
   editable install, because the servers read their seed data from their source tree and a
   regular install leaves those files out; the copy is needed because an editable install
   writes into the source folder, which is read-only on CI. The folder is named by a hash of the
   servers' files, the requirements and our Python version, so a run reuses the venv built by
   an earlier one until the servers change;
3. else ``ServersUnavailable`` with the reason. The pytest fixture ``servers_python`` turns it
   into a skip — except on CI (``CI=true``), where it fails the test instead.

``python -m tests.support.servers_venv`` builds (or finds) it and prints the interpreter's path
(``run.py test`` does this once before the test runs and passes it on as TB_SERVERS_PYTHON).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import THINKINGBOX_DIR

SERVERS_DIR = THINKINGBOX_DIR / "servers"
PACKAGES = ("tb_business_ops_servers_202606", "thinkingbox_tools")
REQUIREMENTS = ("fastmcp>=3,<4", "mcp<2")
PROBE_MODULE = "tb_business_ops_servers_202606"  # what a usable interpreter must import
BUILD_TIMEOUT_S = 900
COMPLETE_STAMP = ".complete"


class ServersUnavailable(Exception):
    """The servers' interpreter cannot be found or built (the reason is the message)."""


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def cache_root() -> Path:
    configured = os.environ.get("TB_SERVERS_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "thinkingbox-web" / "servers"


def servers_fingerprint(source: Path = SERVERS_DIR) -> str:
    """Hash of every file under the servers folder, the requirements and this Python's version."""
    digest = hashlib.sha256()
    digest.update(repr((REQUIREMENTS, PACKAGES, sys.version_info[:2])).encode())
    for path in sorted(p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(source)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _probe(python: Path) -> str:
    """'' when ``python`` imports the servers' package, else why not."""
    if not python.exists():
        return f"{python} does not exist"
    try:
        result = subprocess.run(
            [str(python), "-c", f"import {PROBE_MODULE}"], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} could not run: {exc}"
    if result.returncode != 0:
        return f"{python} cannot import {PROBE_MODULE}: {result.stderr.strip()[-500:]}"
    return ""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock file, so two test runs sharing the cache never build the same venv at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _copy_writable(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    for path in [target, *target.rglob("*")]:  # the source is read-only; pip writes egg-info here
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def build_servers_venv(source: Path = SERVERS_DIR, root: Path | None = None) -> Path:
    """The cached venv's python for this servers folder, built first when missing (takes a minute or two)."""
    if not (source / PACKAGES[0]).is_dir():
        raise ServersUnavailable(f"the servers folder {source} is missing (set TB_SHARED_DIR)")
    if not _has_venv_module():
        raise ServersUnavailable("python3 -m venv is not available (apt-get install python3-venv)")
    root = root or cache_root()
    folder = root / servers_fingerprint(source)[:20]
    python = folder / "venv" / "bin" / "python"
    with _locked(root / f"{folder.name}.lock"):
        if (folder / COMPLETE_STAMP).exists() and not _probe(python):
            return python
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        try:
            _build(source, folder)
        except ServersUnavailable:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        (folder / COMPLETE_STAMP).write_text(" ".join(REQUIREMENTS))
    return python


def _has_venv_module() -> bool:
    return (
        subprocess.run([sys.executable, "-c", "import venv, ensurepip"], capture_output=True).returncode == 0
    )


def _build(source: Path, folder: Path) -> None:
    _copy_writable(source, folder / "src")
    steps = [
        [sys.executable, "-m", "venv", str(folder / "venv")],
        [
            str(folder / "venv" / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            *(arg for package in PACKAGES for arg in ("-e", str(folder / "src" / package))),
            *REQUIREMENTS,
        ],
    ]
    for command in steps:
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServersUnavailable(f"building the servers' venv failed: {exc}") from exc
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip()[-1500:]
            raise ServersUnavailable(f"building the servers' venv failed ({command[2]}): {tail}")
    reason = _probe(folder / "venv" / "bin" / "python")
    if reason:
        raise ServersUnavailable(reason)


def servers_python() -> Path:
    """TB_SERVERS_PYTHON, else the cached venv (built when missing); raises ServersUnavailable."""
    configured = os.environ.get("TB_SERVERS_PYTHON")
    if configured:
        reason = _probe(Path(configured))
        if reason:
            raise ServersUnavailable(f"TB_SERVERS_PYTHON: {reason}")
        return Path(configured)
    return build_servers_venv()


def main() -> int:
    try:
        print(servers_python())
    except ServersUnavailable as exc:
        print(f"servers unavailable: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
