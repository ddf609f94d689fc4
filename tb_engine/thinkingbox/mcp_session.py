"""One connected session to one MCP server process, driven from a private event-loop thread.

The mcp SDK is async; each pool owns one ``LoopThread`` and every session lives in one
long-running task on it (anyio scopes must be entered and left in the same task), so the calls
stay synchronous. Every InfraError raised here carries ``evidence={"backend": …}``: the start
mode, the process id and the tail of the server's stderr.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Coroutine
from typing import Any

from tb_engine.interfaces import InfraError
from tb_engine.thinkingbox.mcp_config import McpServerConfig
from tb_engine.thinkingbox.mcp_launch import ForkServerHandle, ServerProcess, StderrTail, forked, spawned

RESERVED_PREFIX = "__reserved__"
TEARDOWN_TIMEOUT_S = 5.0
STDERR_SETTLE_S = 0.5  # a crashed server's last lines arrive just after its connection ends


class LoopThread:
    """A private asyncio loop on a daemon thread; ``run`` executes a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="tb-mcp-loop", daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups of the SDK's task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class McpSession:
    """One connected session to one server process; used for exactly one attempt."""

    def __init__(self, config: McpServerConfig, loop: LoopThread, fork: ForkServerHandle | None = None):
        self.config = config
        self._loop = loop
        self._fork = fork
        self.process = ServerProcess()
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self._closing: concurrent.futures.Future[None] | None = None
        self.started_at = time.monotonic()
        self.timings_ms: dict[str, float] = {}
        # __reserved__teardown before the process ends: see McpServerConfig.teardown.
        self.wants_teardown = config.teardown == "always"
        self._task = loop.submit(self._keep())

    async def _keep(self) -> None:
        from mcp import Client  # noqa: PLC0415 — heavy: the mcp SDK takes ~1 s to import; only a live session needs it

        self._stop = asyncio.Event()
        started = time.perf_counter()
        tail: StderrTail | None = None
        try:
            mode = self.config.start_mode()
            transport: Any
            if mode == "url":
                self.process.start = "url"
                transport = self.config.url
            else:
                tail = self.process.stderr = StderrTail()
                if mode == "fork" and self._fork is not None:
                    transport = forked(self._fork, self.process)
                else:
                    transport = spawned(
                        self.config.command, self.config.args, self.config.env, self.config.cwd, self.process
                    )
            async with Client(transport, mode=self.config.mode) as client:
                self._client = client
                self.timings_ms["connect"] = (time.perf_counter() - started) * 1000.0
                self._ready.set_result(True)
                await self._stop.wait()
        except BaseException as exc:  # surfaced to whoever waits for the session
            if not self._ready.done():
                self._ready.set_exception(_leaf(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            if tail is not None:
                tail.handed_over()

    def alive(self) -> bool:
        """False once the session failed or its server process is gone (True while still starting)."""
        if not self._ready.done():
            return True
        if self.failed or self.process.exited:
            return False
        if self.process.start == "spawn":
            return self.process.returncode() is None
        return self.process.pid is None or _pid_running(self.process.pid)

    @property
    def failed(self) -> bool:
        """True when the session could not be started (its ready future holds the error)."""
        return self._ready.done() and self._ready.exception() is not None

    def evidence(self, *, stderr: bool = False) -> dict[str, Any]:
        """What an attempt stores about its server process (the stderr tail for infra errors)."""
        found: dict[str, Any] = {
            "start": self.process.start or self.config.start_mode(),
            "pid": self.process.pid,
        }
        if self.process.started_ms:
            found["process_start_ms"] = round(self.process.started_ms, 2)
        if stderr:
            found["stderr_tail"] = self.stderr_tail()
        return {"backend": found}

    def stderr_tail(self) -> str:
        tail = self.process.stderr
        if tail is None:
            return ""
        try:
            self._loop.run(tail.settle(STDERR_SETTLE_S), STDERR_SETTLE_S + 1.0)
        except Exception:  # the tail read so far is still worth showing
            pass
        return tail.text()

    def infra_error(self, message: str) -> InfraError:
        """An InfraError carrying how the server process ended and its stderr tail."""
        return InfraError(message, evidence=self.evidence(stderr=True))

    def wait_ready(self) -> None:
        waited = time.perf_counter()
        try:
            self._ready.result(self.config.start_timeout_s)
        except Exception as exc:
            if isinstance(exc, InfraError):  # the fork server's own report (its stderr included)
                raise InfraError(
                    str(exc), evidence=merged_evidence(exc.evidence, self.evidence(stderr=True))
                ) from exc
            text = str(exc) or type(exc).__name__
            raise self.infra_error(f"MCP server did not start: {text}") from exc
        finally:
            self.timings_ms.setdefault("wait", (time.perf_counter() - waited) * 1000.0)

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.wait_ready()
        try:
            return self._loop.run(self._call_tool(name, arguments), self.config.call_timeout_s)
        except Exception as exc:
            reason = _leaf(exc)
            raise self.infra_error(
                f"MCP call {name} failed: {type(reason).__name__}: {reason}"
                + (f" ({self.process.exited})" if self.process.exited else "")
            ) from exc

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """``tools/call`` through the SDK session, without its structured-output check.

        We read a result's text. ``ClientSession.call_tool`` would first list the tools of this
        session to validate structured content against their output schemas: a second tools/list
        per attempt (~50 KB for a ThinkingBox server, parsed on both ends) for a check we do not use.
        """
        from mcp import types as mcp_types  # noqa: PLC0415 — heavy: the mcp SDK takes ~1 s to import; only a live session needs it

        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name=name, arguments=arguments)
        )
        return await self._client.session.send_request(request, mcp_types.CallToolResult)

    def list_tools(self) -> list[dict[str, Any]]:
        self.wait_ready()
        try:
            listed = self._loop.run(self._client.list_tools(), self.config.call_timeout_s)
        except Exception as exc:
            raise self.infra_error(f"MCP list_tools failed: {_leaf(exc)}") from exc
        return [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]

    def close(self, *, wait: bool = True) -> concurrent.futures.Future[None]:
        """Teardown, then end the process; with ``wait=False`` in the background (the future says when)."""
        if self._closing is None:
            self._closing = self._loop.submit(self._close())
        if wait:
            try:
                self._closing.result(TEARDOWN_TIMEOUT_S + 15)
            except Exception:
                pass
        return self._closing

    async def _close(self) -> None:
        ready = asyncio.wrap_future(self._ready)
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.config.start_timeout_s)
        except BaseException:
            pass
        if (
            self.wants_teardown
            and self._ready.done()
            and self._ready.exception() is None
            and not self.process.exited
        ):
            try:
                await asyncio.wait_for(self._call_tool(f"{RESERVED_PREFIX}teardown", {}), TEARDOWN_TIMEOUT_S)
            except BaseException:
                pass  # the process is being discarded either way
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(asyncio.wrap_future(self._task), TEARDOWN_TIMEOUT_S + 10)
        except BaseException:
            pass


def _pid_running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def merged_evidence(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    merged = {**second.get("backend", {}), **{k: v for k, v in first.get("backend", {}).items() if v}}
    return {"backend": merged}
