"""How an imported domain's MCP tool server is started: a launch plan from command options or settings.

Stored per domain in ``Domain.spec["mcp"]["launch"]`` as ``{command, args, env[, cwd]}`` or
``{url, env}`` (+ optional ``pool_size``) and read back by
``tb_engine.thinkingbox.mcp_config.launch_config``. Three sources, one per import:

* ``--servers servers.yaml``: ThinkingBox's own server config (server name -> command with
  ``{python}``, env); ``--python`` (or env ``TB_SERVERS_PYTHON``) names the servers' interpreter.
  A scenario whose server has no entry gets no launch config.
* ``--mcp-command`` / ``--mcp-url``: one template for every scenario; ``{server}`` becomes the
  scenario's server name (``python -m thinkingbox.mcp_{server}``), ``{python}`` as above.
* settings ``THINKINGBOX_MCP_COMMAND`` / ``THINKINGBOX_MCP_URL`` or env ``TB_MCP_COMMAND`` /
  ``TB_MCP_URL``: the same template, as a default.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from tb_engine.thinkingbox.servers_config import (
    PYTHON_PLACEHOLDER,
    read_servers_config,
    server_launch,
)

SERVERS_PYTHON_ENV = "TB_SERVERS_PYTHON"


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


@dataclass(frozen=True)
class LaunchPlan:
    """Where each scenario's launch config comes from; ``for_server`` gives it (None: no entry)."""

    source: str  # for messages: "--servers FILE", "--mcp-command", "THINKINGBOX_MCP_COMMAND", …
    template: dict[str, Any] | None = None  # {"command": str} or {"url": str}, with {server}/{python}
    servers: dict[str, Any] | None = None  # servers.yaml entries by server name
    servers_file: str = ""
    python: str = ""
    env: dict[str, str] = field(default_factory=dict)  # --mcp-env, over the entry's own env
    cwd: str = ""
    pool_size: int | None = None

    def for_server(self, server: str) -> dict[str, Any] | None:
        """The concrete launch config of one server (ThinkingBoxFormatError for a bad servers.yaml entry)."""
        if self.servers is not None:
            if server not in self.servers:
                return None
            launch = server_launch(
                self.servers[server], server=server, python=self.python or None, file=self.servers_file
            )
        else:
            launch = self._from_template(server)
        launch["env"] = {**launch.get("env", {}), **self.env}
        if self.cwd and "command" in launch:
            launch["cwd"] = self.cwd
        if self.pool_size:
            launch["pool_size"] = self.pool_size
        return launch

    def _from_template(self, server: str) -> dict[str, Any]:
        template = self.template or {}
        if template.get("command"):
            argv = shlex.split(template["command"].replace("{server}", server))
            if any(PYTHON_PLACEHOLDER in a for a in argv):
                if not self.python:
                    raise LaunchError(
                        f"{self.source} uses {PYTHON_PLACEHOLDER}: name the servers' interpreter (--python)"
                    )
                argv = [a.replace(PYTHON_PLACEHOLDER, self.python) for a in argv]
            return {"command": argv[0], "args": argv[1:]}
        return {"url": template["url"].replace("{server}", server)}


def _servers_python(python: str) -> str:
    """--python, else env TB_SERVERS_PYTHON, as an absolute path ('' when neither is given).

    Not resolved through symlinks: a venv's ``bin/python`` is a symlink to the base interpreter,
    and only the link path runs with the venv's packages.
    """
    option = "--python" if python else SERVERS_PYTHON_ENV
    python = python or os.environ.get(SERVERS_PYTHON_ENV, "")
    if not python:
        return ""
    path = os.path.abspath(os.path.expanduser(python))
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise LaunchError(f"{option} {python!r}: not an executable file")
    return path


def launch_plan(
    *,
    servers_file: str = "",
    python: str = "",
    command: str = "",
    url: str = "",
    env: dict[str, str] | None = None,
    cwd: str = "",
    pool_size: int | None = None,
) -> LaunchPlan | None:
    """The plan from options, else from settings/env (THINKINGBOX_MCP_COMMAND / _URL), else None.

    Raises LaunchError naming the option, and ThinkingBoxFormatError for an unreadable servers.yaml.
    """
    if command and url:
        raise LaunchError("give --mcp-command or --mcp-url, not both")
    if servers_file and (command or url):
        raise LaunchError("give --servers or --mcp-command / --mcp-url, not both")
    if pool_size is not None and pool_size < 1:
        raise LaunchError("--mcp-pool-size must be at least 1")
    common: dict[str, Any] = {
        "python": _servers_python(python),
        "env": dict(env or {}),
        "cwd": cwd,
        "pool_size": pool_size,
    }
    if servers_file:
        return LaunchPlan(
            source=f"--servers {servers_file}",
            servers=read_servers_config(servers_file),
            servers_file=str(servers_file),
            **common,
        )
    if command:
        return LaunchPlan(source="--mcp-command", template={"command": command}, **common)
    if url:
        return LaunchPlan(source="--mcp-url", template={"url": url}, **common)
    for name, key, env_name in (
        ("THINKINGBOX_MCP_COMMAND", "command", "TB_MCP_COMMAND"),
        ("THINKINGBOX_MCP_URL", "url", "TB_MCP_URL"),
    ):
        value = getattr(settings, name, "") or os.environ.get(env_name, "")
        if value:
            return LaunchPlan(source=name, template={key: value}, **common)
    return None
