"""ThinkingBox's own server config (``servers/servers.yaml``) -> our MCP launch configs.

The file maps a server name to how ThinkingBox starts it::

    servers:
      sandbox_external_retail:
        type: mcp-process
        command: ["{python}", "-m", "tb_business_ops_servers_202606.mcp_sandbox_external_retail"]
        env: {TYPESENSE_API_KEY: "Fake"}

``{python}`` is the servers' interpreter (they live in a venv of their own). A launch config is
the shape stored in ``Domain.spec["mcp"]["launch"]`` and read by ``mcp_config.launch_config``:
``{"command", "args", "env"}`` for a process, ``{"url", "env"}`` for an entry that gives a URL.
Entries are checked when used, so an entry for a server no imported scenario needs cannot fail
an import.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from tb_engine.thinkingbox.errors import ThinkingBoxFormatError

PYTHON_PLACEHOLDER = "{python}"
PROCESS_TYPE = "mcp-process"


def read_servers_config(path: str | Path) -> dict[str, Any]:
    """The ``servers:`` mapping of a servers.yaml (server name -> its entry, not yet checked)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ThinkingBoxFormatError(f"cannot read servers config: {exc.strerror}", file=path) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ThinkingBoxFormatError(
            f"malformed YAML: {getattr(exc, 'problem', None) or exc}",
            file=path,
            line=mark.line + 1 if mark is not None else None,
        ) from exc
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ThinkingBoxFormatError(
            "servers config needs a 'servers:' mapping of server name -> entry", file=path
        )
    return {str(name): entry for name, entry in servers.items()}


def server_launch(entry: Any, *, server: str, python: str | None, file: str | Path) -> dict[str, Any]:
    """One servers.yaml entry -> a launch config, ``{python}`` filled in (errors name server and file)."""

    def fail(message: str) -> ThinkingBoxFormatError:
        return ThinkingBoxFormatError(f"server {server!r}: {message}", file=file)

    if not isinstance(entry, dict):
        raise fail("entry must be a mapping")
    env = entry.get("env") or {}
    if not isinstance(env, dict) or any(isinstance(v, (dict, list)) for v in env.values()):
        raise fail("env must map names to plain values")
    launch: dict[str, Any] = {"env": {str(k): "" if v is None else str(v) for k, v in env.items()}}
    kind = entry.get("type", PROCESS_TYPE)
    if kind != PROCESS_TYPE:
        if not isinstance(entry.get("url"), str) or not entry["url"]:
            raise fail(f"type {kind!r} is not supported (use {PROCESS_TYPE} with a command, or give a url)")
        launch["url"] = entry["url"]
        return launch
    command = entry.get("command")
    argv = shlex.split(command) if isinstance(command, str) else command
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
        raise fail("command must be a non-empty list of strings")
    if any(PYTHON_PLACEHOLDER in a for a in argv):
        if not python:
            raise fail(f"command uses {PYTHON_PLACEHOLDER}: name the servers' interpreter (--python)")
        argv = [a.replace(PYTHON_PLACEHOLDER, python) for a in argv]
    launch.update(command=argv[0], args=argv[1:])
    return launch
