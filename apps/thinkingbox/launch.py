"""How an imported domain's MCP tool server is started: from command options or a settings default.

Stored in ``Domain.spec["mcp"]["launch"]`` and read back by
``tb_engine.thinkingbox.mcp_backend.launch_config``. ``{server}`` in a command or URL is replaced by
the scenario (server) name, so one default serves every scenario
(e.g. ``python -m thinkingbox.mcp_{server}``).
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from django.conf import settings


class LaunchError(ValueError):
    """An MCP launch option that cannot be used (names the option)."""


def parse_env(pairs: list[str] | None) -> dict[str, str]:
    """``["KEY=VALUE", …]`` -> dict (LaunchError naming the bad pair)."""
    env: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise LaunchError(f"--mcp-env {pair!r}: expected KEY=VALUE")
        env[key.strip()] = value
    return env


def launch_template(
    *,
    command: str = "",
    url: str = "",
    env: dict[str, str] | None = None,
    cwd: str = "",
    pool_size: int | None = None,
) -> dict[str, Any] | None:
    """The launch template from options, else from settings/env (THINKINGBOX_MCP_COMMAND / _URL), else None."""
    if command and url:
        raise LaunchError("give --mcp-command or --mcp-url, not both")
    command = (
        command or getattr(settings, "THINKINGBOX_MCP_COMMAND", "") or os.environ.get("TB_MCP_COMMAND", "")
    )
    if not command:
        url = url or getattr(settings, "THINKINGBOX_MCP_URL", "") or os.environ.get("TB_MCP_URL", "")
    if not command and not url:
        return None
    template: dict[str, Any] = {"command": command, "url": url, "env": dict(env or {}), "cwd": cwd}
    if pool_size is not None:
        if pool_size < 1:
            raise LaunchError("--mcp-pool-size must be at least 1")
        template["pool_size"] = pool_size
    return template


def launch_for_server(template: dict[str, Any], server: str) -> dict[str, Any]:
    """The concrete launch config of one server: ``{server}`` filled in, the command split into argv."""
    launch: dict[str, Any] = {"env": dict(template.get("env") or {})}
    if template.get("command"):
        argv = shlex.split(template["command"].replace("{server}", server))
        launch.update(command=argv[0], args=argv[1:])
    else:
        launch["url"] = template["url"].replace("{server}", server)
    if template.get("cwd"):
        launch["cwd"] = template["cwd"]
    if template.get("pool_size"):
        launch["pool_size"] = template["pool_size"]
    return launch
