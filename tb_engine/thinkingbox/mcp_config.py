"""How to reach an MCP tool server: ``McpServerConfig`` and ``launch_config``, which reads it from a domain.

A config is a stdio command (+ env, cwd) or a streamable-HTTP URL, plus how each attempt's process
starts (``fork`` or ``spawn``, see ``mcp_launch``) and what the pool does once per server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tb_engine.interfaces import InfraError
from tb_engine.spec import DomainSpec
from tb_engine.thinkingbox.mcp_launch import fork_module

START_MODES = ("fork", "spawn")


def default_start_mode() -> str:
    """``TB_MCP_START`` (fork | spawn), fork when unset."""
    mode = os.environ.get("TB_MCP_START", "fork").strip() or "fork"
    if mode not in START_MODES:
        raise InfraError(f"TB_MCP_START={mode!r}: expected one of {', '.join(START_MODES)}")
    return mode


@dataclass(frozen=True)
class McpServerConfig:
    """How to reach a tool server: a stdio command (+ env) or a streamable-HTTP URL.

    ``start``: ``fork`` (a fresh child of a pre-imported parent; only for ``python -m MODULE``
    commands), ``spawn`` (the command itself per attempt), or "" for the ``TB_MCP_START``
    default. ``list_tools``: ``once`` per pool (the ThinkingBox servers register their tools at
    import, so every fresh process lists the same ones) or ``per_attempt``. ``teardown``: when to
    call ``__reserved__teardown`` before the process ends — ``search`` (default: after an init
    that indexed policy sources into the search service, the one thing the ThinkingBox servers'
    teardown cleans up, outside the process), ``always`` or ``never``. Without a search service
    their teardown fails, and logging that traceback cost each server ~60 ms of CPU.
    """

    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str = ""
    mode: str = "legacy"  # the ThinkingBox servers speak the pre-2026 initialize handshake
    start_timeout_s: float = 60.0
    call_timeout_s: float = 120.0
    start: str = ""
    list_tools: str = "once"
    teardown: str = "search"

    def target(self) -> Any:
        """The SDK's own stdio parameters (or the URL), for driving the server with ``mcp.Client`` directly."""
        from mcp.client.stdio import StdioServerParameters  # noqa: PLC0415 — heavy: the mcp SDK takes ~1 s to import; only direct SDK use needs it

        if self.url:
            return self.url
        if not self.command:
            raise ValueError("McpServerConfig needs a command or a url")
        return StdioServerParameters(command=self.command, args=list(self.args), env=self.env, cwd=self.cwd)

    def start_mode(self) -> str:
        """url, fork or spawn: what this config starts (fork falls back to spawn for other commands)."""
        if self.url:
            return "url"
        if not self.command:
            raise ValueError("McpServerConfig needs a command or a url")
        wanted = self.start or default_start_mode()
        if wanted not in START_MODES:
            raise InfraError(f"MCP launch config: start {wanted!r}: expected one of {', '.join(START_MODES)}")
        return "fork" if wanted == "fork" and fork_module(self.command, self.args) else "spawn"


def launch_config(domain: DomainSpec) -> McpServerConfig:
    """The McpServerConfig stored in ``domain.mcp["launch"]`` (command/args/env/cwd or url, start, list_tools).

    A search service in ``domain.mcp["search"]`` (``{"url", "api_key_env"}``) reaches the server
    the way the ThinkingBox servers read it: the key, read here from the environment variable
    the setting names, as ``TYPESENSE_API_KEY``; the URL as ``TYPESENSE_URL`` (and its parts as
    ``TYPESENSE_HOST``/``_PORT``/``_PROTOCOL``) for servers that read those.
    """
    mcp = domain.mcp or {}
    launch = mcp.get("launch")
    if not isinstance(launch, dict) or not (launch.get("command") or launch.get("url")):
        raise InfraError(
            f"domain {domain.name!r} has no MCP launch config (mcp.launch with a command or a url); "
            "re-import it with --servers servers.yaml, --mcp-command or --mcp-url"
        )
    env = {str(k): str(v) for k, v in (launch.get("env") or {}).items()}
    env.update(_search_env(domain.name, mcp.get("search")))
    return McpServerConfig(
        command=str(launch.get("command") or ""),
        args=tuple(str(a) for a in launch.get("args") or ()),
        env=env or None,
        cwd=launch.get("cwd") or None,
        url=str(launch.get("url") or ""),
        start=str(launch.get("start") or ""),
        list_tools=str(launch.get("list_tools") or "once"),
        teardown=str(launch.get("teardown") or "search"),
    )


def _search_env(domain: str, search: Any) -> dict[str, str]:
    if not isinstance(search, dict) or not search.get("url"):
        return {}
    if search.get("error"):
        raise InfraError(f"domain {domain!r}: {search['error']}")
    url = str(search["url"])
    parts = urlsplit(url)
    env = {
        "TYPESENSE_URL": url,
        "TYPESENSE_HOST": parts.hostname or "",
        "TYPESENSE_PORT": str(parts.port or (443 if parts.scheme == "https" else 8108)),
        "TYPESENSE_PROTOCOL": parts.scheme or "http",
    }
    key_env = str(search.get("api_key_env") or "")
    if key_env:
        if key_env not in os.environ:
            raise InfraError(
                f"domain {domain!r}: the search service's key variable {key_env} is not set on this worker"
            )
        env["TYPESENSE_API_KEY"] = os.environ[key_env]
    return env
