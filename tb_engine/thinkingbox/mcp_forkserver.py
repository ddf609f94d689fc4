"""Fork server for stdio MCP tool servers: import the server module once, fork a fresh process per attempt.

Run with the *servers'* interpreter (standard library only; it never imports tb_engine, whose
dependencies that interpreter does not have)::

    python mcp_forkserver.py --socket PATH [--entry NAME] -m MODULE [ARG ...]

Why: importing a ThinkingBox server module costs about 1.2 s of CPU, forking a process that has
already imported it about 3 ms. The parent imports ``MODULE`` (as ``python -m MODULE`` would,
but without running its ``__main__`` block), never calls a tool (it lists them once, so its children
inherit a full tool-schema cache), then waits for connections on
the unix socket ``PATH``. Each connection gets its own forked child, whose state is therefore
exactly that of a freshly started server.

Protocol (the client is ``tb_engine.thinkingbox.mcp_launch``):

* parent -> client, on stdout: ``{"ready": <pid>}`` once the module is imported and the socket listens.
  Anything the module prints goes to stderr, so stdout carries only that line;
* client -> child: the first message on a new connection carries the write end of a pipe as
  ancillary data (SCM_RIGHTS): the child's stderr, captured per attempt by the client;
* child -> client: one line ``<pid>``, then the server speaks MCP (newline-delimited JSON-RPC)
  over the connection, which is its stdin and stdout;
* the child runs ``MODULE.<entry>.run(transport="stdio")`` (default entry: ``mcp``, the
  ThinkingBox convention); a module without it is re-run as ``__main__`` (still fresh, ~40 ms
  slower). The child exits when its connection closes.

Thread-free stdio (``serve_stdio_on_the_loop``; ``--no-thread-free-stdio`` turns it off): the SDK's
stdio transport reads and writes through ``anyio.wrap_file``, a worker-thread round trip per line
read and two per answer written. The child's stdin is a socket, so the server's own event loop
reads and writes it instead; the SDK's reader and writer tasks still parse and frame every message,
and nothing of the server changes. Measured on the 2-core machine, quiet (2026-12-03), SDK threads
against the loop, runs alternated: the real servers' CPU per episode (fork servers and children,
``bench/env_server.py --mcp --think-ms 0 --concurrency 2 --episodes 160``) 65.9 / 69.6 / 73.6 ->
56.3 / 49.4 / 52.4 ms; with 64 open episodes (the default MCP bench) 89.4 / 91.1 / 76.4 -> 76.3 /
80.9 / 73.8 ms and PSS per open episode 12.8 -> 12.4 MB (no worker threads' stacks); one session's
tool call on our test server p50 1.59-1.86 -> 1.27-1.54 ms (two runs of 1,000 calls each).

Lifetimes: a child dies with the parent (PR_SET_PDEATHSIG on Linux, and the parent kills its
children when it stops); the parent stops when its stdin reaches end of file (the process that
started it is gone) or on SIGTERM; children are reaped as they exit, so none is left a zombie.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import importlib
import inspect
import json
import os
import runpy
import select
import signal
import socket
import stat
import sys
import threading
import traceback
from typing import Any

PR_SET_PDEATHSIG = 1
FIRST_MESSAGE_TIMEOUT_S = 30.0


def _parse(argv: list[str]) -> argparse.Namespace:
    """Our options, then ``-m MODULE``; everything after the module is the server's own arguments."""
    parser = argparse.ArgumentParser(prog="mcp_forkserver.py", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="unix socket path to listen on")
    parser.add_argument("--entry", default="", help="module attribute whose run(transport='stdio') serves")
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="skip learning the lazily imported modules and pre-filling the tool-schema cache",
    )
    parser.add_argument(
        "--no-thread-free-stdio",
        action="store_true",
        help="keep the SDK's threaded stdin/stdout (see serve_stdio_on_the_loop)",
    )
    if "-m" not in argv or argv.index("-m") + 1 >= len(argv):
        parser.error("-m MODULE is required")
    at = argv.index("-m")
    args = parser.parse_args(argv[:at])
    args.module, args.args = argv[at + 1], argv[at + 2 :]
    return args


def _die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent (the fork server) exits (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent still kills its children when it stops
        pass


def _entry_point(module: Any, name: str) -> Any:
    """The callable a child runs to serve over stdio."""
    server = getattr(module, name or "mcp", None)
    run = getattr(server, "run", None)
    if callable(run):
        try:
            accepts_banner = "show_banner" in inspect.signature(run).parameters
        except (TypeError, ValueError):
            accepts_banner = False
        if accepts_banner:  # FastMCP prints a banner on stderr unless told not to
            return lambda: run(transport="stdio", show_banner=False)
        return lambda: run(transport="stdio")
    if name:
        raise SystemExit(f"mcp_forkserver: {module.__name__}.{name} has no run() method")
    return lambda: _run_as_main(module.__name__)


class SocketLines:
    """The connection as the SDK's stdio ``stdin``: lines read on the event loop, no thread.

    ``mcp.server.stdio.stdio_server`` reads stdin through ``anyio.wrap_file``: every line costs a
    hop to a worker thread and back, and every answer two more (write, flush). With 64 children
    on 2 cores those hops wait for the CPU in turn. A child's stdin and stdout are its unix socket,
    so the loop can read and write it directly; the SDK's own reader and writer tasks still parse
    and frame every message. A line ends at a newline, or at end of file.
    """

    CHUNK = 65_536

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already known to hold no newline
        self._eof = False

    def __aiter__(self) -> SocketLines:
        return self

    async def __anext__(self) -> str:
        loop = asyncio.get_running_loop()
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                self._scanned = 0
                return line.decode("utf-8", errors="replace")
            self._scanned = len(self._buffer)
            if self._eof:
                if not self._buffer:
                    raise StopAsyncIteration
                line, self._buffer, self._scanned = bytes(self._buffer), bytearray(), 0
                return line.decode("utf-8", errors="replace")
            try:
                chunk = await loop.sock_recv(self._sock, self.CHUNK)
            except ConnectionResetError:  # the client went away: end of file, as for a pipe
                chunk = b""
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


class SocketWriter:
    """The connection as the SDK's stdio ``stdout``: each answer sent whole from the event loop."""

    def __init__(self, sock: socket.socket):
        self._sock = sock

    async def write(self, text: str) -> None:
        await asyncio.get_running_loop().sock_sendall(self._sock, text.encode("utf-8"))

    async def flush(self) -> None:
        """Nothing is buffered: ``write`` returns once the kernel has the bytes."""


def _stdin_is_a_socket() -> bool:
    try:
        return stat.S_ISSOCK(os.fstat(0).st_mode)
    except OSError:
        return False


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend (trio): keep the SDK's threads
        return False
    return True


_CONNECTIONS: list[socket.socket] = []  # held open until the process exits (see claim_connection)


def claim_connection() -> socket.socket:
    """The connection (fd 0) as a non-blocking socket of our own; fd 0 then reads the null device
    and fd 1 writes to stderr.

    So a handler's stray ``print()`` cannot tear a frame on the wire (mcp 2's own stdio transport
    diverts both descriptors the same way; mcp 1 does not). The socket stays open until the process
    exits, never closed earlier: the client takes end of stream as the child's exit.
    """
    sock = socket.socket(fileno=os.dup(0))
    sock.setblocking(False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    _CONNECTIONS.append(sock)
    return sock


def serve_stdio_on_the_loop() -> int:
    """Make the SDK's ``stdio_server()`` serve a socket stdin from the event loop.

    Rebinds ``stdio_server`` in every loaded module that imported it (the SDK's own module,
    FastMCP's transport) to a wrapper that, called without streams, on asyncio, with a socket for
    stdin, hands the SDK's function ``SocketLines``/``SocketWriter`` over the claimed connection;
    otherwise it is the SDK's function unchanged. Returns how many modules were rebound (0: the
    module does not serve through it).
    """
    sdk = sys.modules.get("mcp.server.stdio")
    original = getattr(sdk, "stdio_server", None)
    if original is None:
        return 0

    @contextlib.asynccontextmanager
    async def stdio_server(stdin: Any = None, stdout: Any = None) -> Any:
        if stdin is not None or stdout is not None or not _on_asyncio() or not _stdin_is_a_socket():
            async with original(stdin, stdout) as streams:
                yield streams
            return
        sock = claim_connection()
        async with original(SocketLines(sock), SocketWriter(sock)) as streams:
            yield streams

    rebound = 0
    for module in list(sys.modules.values()):
        if getattr(module, "stdio_server", None) is original:
            module.stdio_server = stdio_server  # type: ignore[attr-defined]
            rebound += 1
    return rebound


def _run_as_main(name: str) -> None:
    """``python -m name`` in this (forked) process: the module body again, as ``__main__``."""
    sys.modules.pop(name, None)  # else runpy warns that the module was imported before it ran
    runpy.run_module(name, run_name="__main__", alter_sys=True)


PROBE_TIMEOUT_S = 30.0
PROBE_REQUESTS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "warm-up", "version": "1"},
        },
    ),
    ("tools/list", {}),
    ("tools/call", {"name": "__reserved__init", "arguments": {"config": {}}}),
    ("tools/call", {"name": "__reserved__geteffects", "arguments": {}}),
    ("tools/call", {"name": "__reserved__teardown", "arguments": {}}),
)


def learn_imports(serve: Any) -> list[str]:
    """Modules a served session imports lazily, learnt from one throwaway child (never from this process).

    The child answers a scripted session (handshake, tool list, and the reserved init/effects/
    teardown tools on an empty config) and reports which modules it had to import. The parent
    then imports them itself, so later children start with them loaded: about 70 ms less per
    attempt for a ThinkingBox server. The parent still never serves or calls a tool.
    """
    ours, theirs = socket.socketpair()
    report_read, report_write = os.pipe()
    known = set(sys.modules)
    pid = os.fork()
    if pid == 0:  # the throwaway child
        code = 1
        try:
            ours.close()
            os.close(report_read)
            os.dup2(theirs.fileno(), 0)
            os.dup2(theirs.fileno(), 1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            serve()
            # In the order they were imported (sys.modules keeps it): importing, say, the C half of
            # asyncio before its package leaves the two halves disagreeing about the current task.
            learnt_here = [name for name in list(sys.modules) if name not in known]
            os.write(report_write, json.dumps(learnt_here).encode())
            code = 0
        finally:
            os._exit(code)
    theirs.close()
    os.close(report_write)
    learnt: list[str] = []
    try:
        ours.settimeout(PROBE_TIMEOUT_S)
        reader = ours.makefile("rb")
        for number, (method, params) in enumerate(PROBE_REQUESTS, start=1):
            request = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
            ours.sendall((json.dumps(request) + "\n").encode())
            if not reader.readline():
                break
            if method == "initialize":
                ours.sendall(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        ours.shutdown(socket.SHUT_WR)
        chunks = []
        while select.select([report_read], [], [], PROBE_TIMEOUT_S)[0]:
            chunk = os.read(report_read, 65_536)
            if not chunk:
                break
            chunks.append(chunk)
        learnt = json.loads(b"".join(chunks) or b"[]")
    except (OSError, ValueError):
        pass  # no warm-up then: children import what they need themselves
    finally:
        ours.close()
        os.close(report_read)
        finished, _status = os.waitpid(pid, os.WNOHANG)
        if finished == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    imported = []
    for name in learnt:
        try:
            importlib.import_module(name)
            imported.append(name)
        except BaseException:  # a module that only imports inside a running server stays lazy
            continue
    return imported


def prefill_tool_cache(module: Any, name: str) -> int:
    """Fill the MCP server's tool-schema cache in the parent, so no child lists its tools again.

    The SDK's low-level server validates every ``tools/call`` against the tool's input schema
    from a cache that starts empty in each process: a fresh child's first call (``__reserved__init``,
    on every reset) therefore runs the whole tool listing first (FastMCP's middleware and
    visibility rules over every tool, ~7 ms of a ThinkingBox server's CPU per attempt). Listing
    once here (a listing only: no tool runs) lets every forked child start with the cache full. A
    tool missing from it (registered later) is still a cache miss that refreshes it, as before.
    Returns how many tools were cached (0 when the module has no such server).
    """
    low = getattr(getattr(module, name or "mcp", None), "_mcp_server", None)
    cache = getattr(low, "_tool_cache", None)
    handlers = getattr(low, "request_handlers", None)
    if not isinstance(cache, dict) or not isinstance(handlers, dict):
        return 0
    try:
        import asyncio  # noqa: PLC0415 — only when the module serves through the SDK's low-level server

        from mcp import types as mcp_types  # noqa: PLC0415 — the server's own dependency, as above

        handler = handlers.get(mcp_types.ListToolsRequest)
        if handler is None:
            return 0
        asyncio.run(handler(None))  # the SDK's own cache refresh, as on a cache miss
    except BaseException:  # a server that cannot list outside a session: children list lazily
        cache.clear()
        return 0
    return len(cache)


class ForkServer:
    """The parent: owns the listening socket and the set of live children."""

    def __init__(self, listener: socket.socket, serve: Any, control: Any):
        self.listener = listener
        self.serve = serve
        self.control = control
        self.children: set[int] = set()
        self.pid = os.getpid()

    def reap(self, *_args: Any) -> None:
        while self.children:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)

    def loop(self) -> None:
        while True:
            readable, _, _ = select.select([self.listener.fileno(), 0], [], [])
            if 0 in readable and not os.read(0, 4096):
                return  # stdin closed: whoever started us is gone
            if self.listener.fileno() in readable:
                try:
                    conn, _ = self.listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                self.fork_child(conn)

    def fork_child(self, conn: socket.socket) -> None:
        pid = os.fork()
        if pid == 0:
            self.child(conn)  # never returns
        self.children.add(pid)
        conn.close()

    def child(self, conn: socket.socket) -> None:
        code = 1
        try:
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            _die_with_parent()
            if os.getppid() != self.pid:  # the parent died between fork and prctl
                os._exit(1)
            self.listener.close()
            self.control.close()
            conn.settimeout(FIRST_MESSAGE_TIMEOUT_S)
            _message, fds, _flags, _address = socket.recv_fds(conn, 4096, 4)
            conn.settimeout(None)
            os.dup2(conn.fileno(), 0)
            os.dup2(conn.fileno(), 1)
            if fds:
                os.dup2(fds[0], 2)
            for fd in fds:
                os.close(fd)
            conn.close()
            os.write(1, f"{os.getpid()}\n".encode())
            self.serve()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)

    def stop(self) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while self.children:
            try:
                pid, _status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            self.children.discard(pid)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    # Run as a script, sys.path[0] is our own folder; ``python -m`` would have the working directory
    # there instead (and our module names must not shadow the server's).
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.getcwd()] + [p for p in sys.path[1:] if os.path.abspath(p or ".") != here]
    control = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever the server module prints goes to stderr; stdout carries our one line
    sys.argv = [args.module, *args.args]
    module = importlib.import_module(args.module)
    serve = _entry_point(module, args.entry)
    sys.stdout.flush()
    sys.stderr.flush()
    if not args.no_thread_free_stdio:
        serve_stdio_on_the_loop()
    if not args.no_warm_up:
        learn_imports(serve)
        prefill_tool_cache(module, args.entry)
    # Everything imported so far goes to the permanent generation: a child's collections then never
    # walk (and so never copy-on-write) the parent's objects. Measured with the tool-cache pre-fill:
    # 58.2 -> 52.1 ms of a child's CPU per episode, 4831 -> 4544 minor faults (noisy, shared box).
    gc.collect()
    gc.freeze()
    if threading.active_count() > 1:  # only the forking thread survives a fork: say so where it can be read
        print(
            f"mcp_forkserver: {threading.active_count()} threads after importing {args.module}; "
            "children may inherit locks held by the others",
            file=sys.stderr,
            flush=True,
        )

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    listener.bind(args.socket)
    listener.listen(128)
    listener.setblocking(False)
    server = ForkServer(listener, serve, control)

    def terminate(*_args: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGCHLD, server.reap)
    signal.signal(signal.SIGTERM, terminate)
    control.write(json.dumps({"ready": os.getpid()}) + "\n")
    try:
        server.loop()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        server.stop()
        listener.close()
        try:
            os.unlink(args.socket)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
