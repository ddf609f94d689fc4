"""Start one MCP server process per attempt: forked from a pre-imported parent, or a plain spawn.

Both ways give the server real pipes (never this process's ``sys.stdout``/``sys.stderr``, which a
Celery worker replaces by logging proxies without a file descriptor) and capture its stderr per
attempt (``StderrTail``, the last ``STDERR_TAIL_BYTES``). Both hand the official mcp SDK's
``Client`` a transport of memory streams carrying ``SessionMessage``s, framed as newline-delimited
JSON-RPC like the SDK's own stdio transport:

* ``fork`` (default for ``python -m MODULE`` commands): a ``ForkServerHandle`` per launch config
  and process runs ``mcp_forkserver.py`` with the servers' interpreter. It imports the server
  module once (~1.2 s of CPU for a ThinkingBox server) and forks a fresh child per connection on
  a unix socket (~3 ms), so every attempt still gets a fresh process. A parent that died is
  noticed at the next connection and started again.
* ``spawn``: the command itself, started per attempt (``start: spawn`` in the launch config, the
  ``TB_MCP_START=spawn`` setting, or any command that is not ``python -m MODULE``).

Every process ends with its attempt: the transport closes the server's stdin and, if the
process has not exited within ``EXIT_GRACE_S``, kills it. None outlives the process that owns it:
each spawned server's and fork server's process group is killed by ``mcp_reaper``'s watcher when
the owner dies, even by SIGKILL (a fork server's children also die with it, PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from tb_engine.interfaces import InfraError
from tb_engine.thinkingbox.mcp_reaper import unwatch_group, watch_group

FORKSERVER_SCRIPT = Path(__file__).with_name("mcp_forkserver.py")
STDERR_TAIL_BYTES = 16_384
STORED_TAIL_CHARS = 8_000  # what an attempt keeps of it
EXIT_GRACE_S = 2.0
SAFE_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")

StartMode = str  # "fork" | "spawn"


def server_environment(extra: dict[str, str] | None) -> dict[str, str]:
    """The environment a server process gets: a few safe variables of ours plus its launch env."""
    env = {name: os.environ[name] for name in SAFE_ENV if name in os.environ}
    env.update(extra or {})
    return env


def fork_module(command: str, args: tuple[str, ...]) -> str:
    """The module of a ``python -m MODULE …`` launch command ('' when it is not one: spawn only)."""
    if len(args) >= 2 and args[0] == "-m" and args[1] and "python" in Path(command).name:
        return args[1]
    return ""


class StderrTail:
    """The read end of a pipe that is one server process's stderr, keeping its last bytes.

    Made and read on the session's event loop (``add_reader``: no thread per process).
    ``write_fd`` goes to the process and is closed here once it has been handed over.
    """

    def __init__(self, limit: int = STDERR_TAIL_BYTES):
        self.limit = limit
        self._read_fd, self.write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self._buffer = bytearray()
        self._eof = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._read_fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._read_fd, 65_536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._finish()
            return
        self._buffer += chunk
        if len(self._buffer) > self.limit:
            del self._buffer[: len(self._buffer) - self.limit]

    def _finish(self) -> None:
        if self._read_fd >= 0:
            self._loop.remove_reader(self._read_fd)
            os.close(self._read_fd)
            self._read_fd = -1
        self._eof.set()

    def handed_over(self) -> None:
        """The process holds its copy of the write end now: close ours, so EOF means it exited."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    async def settle(self, timeout: float) -> None:
        """Wait (bounded) until every writer has closed the pipe, e.g. a crashed server's last lines."""
        if self.write_fd < 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._eof.wait(), timeout)

    def close(self) -> None:
        self.handed_over()
        self._finish()

    def text(self, chars: int = STORED_TAIL_CHARS) -> str:
        return bytes(self._buffer).decode("utf-8", "replace")[-chars:]


@dataclass
class ServerProcess:
    """What an attempt knows about its server process (filled in by the transport)."""

    start: StartMode = ""
    pid: int | None = None
    returncode: Callable[[], int | None] = field(default=lambda: None, repr=False)
    stderr: StderrTail | None = field(default=None, repr=False)
    started_ms: float = 0.0  # process start (fork or spawn) until its streams were connected
    exited: str = ""  # how the connection ended, when it ended early

    def describe_exit(self) -> str:
        code = self.returncode()
        if code is not None:
            return f"server process {self.pid} exited with code {code}"
        return self.exited or (f"server process {self.pid}" if self.pid else "server process")


# --- line framing shared by both transports ---------------------------------------------------


@contextlib.asynccontextmanager
async def _framed(
    receive: Any, send: Any, process: ServerProcess, first_line: Callable[[bytes], None] | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """Memory streams of SessionMessages over a byte stream pair carrying one JSON-RPC message per line."""
    from mcp import types as mcp_types  # noqa: PLC0415 — heavy: the mcp SDK takes ~1 s to import; only a live session needs it
    from mcp.shared.message import SessionMessage  # noqa: PLC0415 — heavy: the mcp SDK, as above

    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[Any](0)

    async def pump_in() -> None:
        buffer = b""
        expect_first = first_line is not None
        async with read_writer:
            try:
                while True:
                    try:
                        chunk = await receive.receive()
                    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                        process.exited = process.exited or f"{process.describe_exit()} closed the connection"
                        return
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        if expect_first and first_line is not None:
                            expect_first = False
                            first_line(line)
                            continue
                        if not line.strip():
                            continue
                        try:
                            item: Any = SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line))
                        except ValueError as exc:
                            item = exc
                        await read_writer.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return

    async def pump_out() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await send.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()

    async with anyio.create_task_group() as group:
        group.start_soon(pump_in)
        group.start_soon(pump_out)
        try:
            yield read_stream, write_stream
        finally:
            group.cancel_scope.cancel()
            for stream in (read_stream, write_stream):
                await stream.aclose()


# --- spawn ---------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def spawned(
    command: str, args: tuple[str, ...], env: dict[str, str] | None, cwd: str | None, process: ServerProcess
) -> AsyncIterator[tuple[Any, Any]]:
    """Transport: the launch command started as a new process (own session) with real pipes."""
    tail = process.stderr
    assert tail is not None
    started = time.perf_counter()
    try:
        child = await anyio.open_process(
            [command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=tail.write_fd,
            env=server_environment(env),
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        tail.handed_over()
    watch_group(child.pid)  # its own session: the group dies with us even if the server ignores its stdin
    process.start, process.pid = "spawn", child.pid
    process.returncode = lambda: child.returncode
    process.started_ms = (time.perf_counter() - started) * 1000.0
    assert child.stdout is not None and child.stdin is not None
    try:
        async with _framed(child.stdout, child.stdin, process) as streams:
            yield streams
    finally:
        with anyio.CancelScope(shield=True):
            await _end_spawned(child)
        unwatch_group(child.pid)


async def _end_spawned(child: Any) -> None:
    with contextlib.suppress(Exception):
        await child.stdin.aclose()
    with anyio.move_on_after(EXIT_GRACE_S):
        await child.wait()
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, sig)
        with anyio.move_on_after(EXIT_GRACE_S):
            await child.wait()
            return


# --- fork ----------------------------------------------------------------------------------------


class ForkServerHandle:
    """The fork-server parent for one launch config in this process; started on first use, restarted when dead.

    Thread-safe: ``socket_path`` blocks (importing the server module takes about a second) and
    is called from a worker thread of the session loop, never on the loop itself.
    """

    def __init__(
        self,
        command: str,
        args: tuple[str, ...],
        env: dict[str, str] | None,
        cwd: str | None,
        start_timeout_s: float = 60.0,
    ):
        self.command, self.args, self.env, self.cwd = command, args, env, cwd
        self.start_timeout_s = start_timeout_s
        self.starts = 0
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: str | None = None
        self._stderr = bytearray()
        self._stderr_thread: threading.Thread | None = None
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def socket_path(self) -> str:
        """The parent's socket, starting the parent first when it is not running (raises InfraError)."""
        with self._lock:
            if self._closed:
                raise InfraError("MCP fork server is closed")
            if not self.alive():
                self._stop_locked()
                self._start_locked()
            assert self._folder is not None
            return os.path.join(self._folder, "s")

    def restart_if_dead(self) -> bool:
        """After a refused connection: True when the parent had died (the next socket_path starts it again)."""
        with self._lock:
            return not self.alive()

    def _start_locked(self) -> None:
        self._folder = tempfile.mkdtemp(prefix="tb-mcpfork-")
        path = os.path.join(self._folder, "s")
        command = [self.command, str(FORKSERVER_SCRIPT), "--socket", path, *self.args]
        self._stderr = bytearray()
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=server_environment(self.env),
                cwd=self.cwd,
                # Its own process group (killed as one, and no terminal Ctrl-C reaches it), but not its own
                # session: with autogroup scheduling (on by default in Debian's kernel) a new session is a
                # new scheduling group, and all of a domain's episodes (~21 of 64 open in the MCP bench)
                # then shared one task's CPU share. Measured on bench/env_server.py --mcp under load 8-9:
                # the servers' children waited 282 s on the run queue with setsid, 58 s without.
                process_group=0,
            )
        except OSError as exc:
            raise InfraError(
                f"MCP server did not start: {exc}", evidence={"backend": {"stderr_tail": ""}}
            ) from exc
        self._process = process
        watch_group(process.pid)  # the fork server and its children (one group) die with this process
        self.starts += 1
        self._stderr_thread = threading.Thread(
            target=self._read_stderr, args=(process,), name="tb-mcpfork-stderr", daemon=True
        )
        self._stderr_thread.start()
        if not self._wait_ready(process):
            self._stop_locked()
            tail = bytes(self._stderr).decode("utf-8", "replace")[-STORED_TAIL_CHARS:]
            code = process.returncode
            why = f"exited with code {code}" if code is not None else "did not answer"
            raise InfraError(
                f"MCP server did not start: fork server for {' '.join(self.args)} {why}",
                evidence={"backend": {"start": "fork", "stderr_tail": tail}},
            )

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> bool:
        assert process.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        line = b""
        while time.monotonic() < deadline and not line.endswith(b"\n"):
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
        try:
            return isinstance(json.loads(line or b"{}").get("ready"), int)
        except (ValueError, AttributeError):
            return False

    def _read_stderr(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        while chunk := os.read(process.stderr.fileno(), 65_536):
            self._stderr += chunk
            if len(self._stderr) > STDERR_TAIL_BYTES:
                del self._stderr[: len(self._stderr) - STDERR_TAIL_BYTES]

    def stderr_tail(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")[-STORED_TAIL_CHARS:]

    def _stop_locked(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()  # end of file: the parent kills its children and exits
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
            unwatch_group(process.pid)
            if process.stdout is not None:
                process.stdout.close()
        if self._stderr_thread is not None:
            self._stderr_thread.join(timeout=5)
            self._stderr_thread = None
        if process is not None and process.stderr is not None:
            process.stderr.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stop_locked()

    def forget(self) -> None:
        """In a forked copy of this process: drop the handle without touching the parent's fork server."""
        self._process, self._folder, self._stderr_thread = None, None, None
        self._closed = True


@contextlib.asynccontextmanager
async def forked(handle: ForkServerHandle, process: ServerProcess) -> AsyncIterator[tuple[Any, Any]]:
    """Transport: a fresh child of the fork server, reached over a unix socket."""
    tail = process.stderr
    assert tail is not None
    started = time.perf_counter()
    stream = None
    try:
        for attempt in range(2):
            path = await anyio.to_thread.run_sync(handle.socket_path)
            try:
                stream = await anyio.connect_unix(path)
                break
            except OSError:
                # A parent that died since the last check: start it again, once.
                if attempt == 1 or not await anyio.to_thread.run_sync(handle.restart_if_dead):
                    raise
        assert stream is not None
        await stream.send_fds(b"{}", [tail.write_fd])
    finally:
        tail.handed_over()
    process.start = "fork"

    def set_pid(line: bytes) -> None:
        with contextlib.suppress(ValueError):
            process.pid = int(line)
        process.started_ms = (time.perf_counter() - started) * 1000.0

    try:
        async with _framed(stream, stream, process, first_line=set_pid) as streams:
            yield streams
    finally:
        with anyio.CancelScope(shield=True):
            await _end_forked(stream, process)


async def _end_forked(stream: Any, process: ServerProcess) -> None:
    """Close the child's stdin; it exits at end of file (the fork server reaps it). Kill it if it lingers."""
    with contextlib.suppress(Exception):
        await stream.send_eof()
    ended = False
    with anyio.move_on_after(EXIT_GRACE_S):
        try:
            while True:
                await stream.receive()
        except Exception:  # end of stream (or a broken one): the child has closed its end
            ended = True
    with contextlib.suppress(Exception):
        await stream.aclose()
    # The child holds its end of the connection for as long as it runs, so end of stream means it
    # exited (and its pid cannot have been reused yet while it had not).
    if not ended and process.pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signal.SIGKILL)
