"""A watcher that kills this process's MCP server process groups when this process dies, SIGKILL included.

A server normally ends with its attempt, or at end of file on its stdin when its owner dies. One
that is busy in a long tool call, or lingers after its stdio closed, would outlive a killed worker
and hold its memory until someone notices. So each server's process group (spawned servers and
fork servers start their own session; a fork server's children stay in its group) is reported to
one small watcher process per owner. The watcher reads the reports on its stdin; end of file means
the owner is gone, however it died, and it kills every group still listed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading

WATCHER_SOURCE = r"""
import os, signal
groups, buffer = set(), b""
while True:
    try:
        chunk = os.read(0, 4096)
    except InterruptedError:
        continue
    if not chunk:
        break
    buffer += chunk
    *lines, buffer = buffer.split(b"\n")
    for line in lines:
        op, _, pgid = line.partition(b" ")
        (groups.add if op == b"+" else groups.discard)(int(pgid))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""

_lock = threading.Lock()
_watcher: subprocess.Popen[bytes] | None = None
_inherited: list[
    subprocess.Popen[bytes]
] = []  # a parent's watcher seen in a forked copy: kept, never closed twice


def _send(line: str) -> None:
    global _watcher
    with _lock:
        if _watcher is None or _watcher.poll() is not None:
            _watcher = subprocess.Popen(
                [sys.executable, "-c", WATCHER_SOURCE],
                stdin=subprocess.PIPE,
                start_new_session=True,  # not in the owner's group: a signal to that group must not end it
            )
        assert _watcher.stdin is not None
        with contextlib.suppress(OSError):
            _watcher.stdin.write(line.encode())
            _watcher.stdin.flush()


def watch_group(pgid: int) -> None:
    """Kill process group ``pgid`` if this process dies before ``unwatch_group(pgid)``."""
    _send(f"+ {pgid}\n")


def unwatch_group(pgid: int) -> None:
    """The group ended normally: forget it (its id may be reused later)."""
    _send(f"- {pgid}\n")


def _forget_after_fork() -> None:
    """A forked copy (a prefork worker child) gets its own watcher; its copy of the pipe is closed,
    so the parent's watcher still sees end of file when the parent dies."""
    global _watcher, _lock
    _lock = threading.Lock()
    if _watcher is not None and _watcher.stdin is not None:
        with contextlib.suppress(OSError):
            os.close(_watcher.stdin.fileno())
        _inherited.append(_watcher)  # its file object must never close that descriptor number again
    _watcher = None


os.register_at_fork(after_in_child=_forget_after_fork)
