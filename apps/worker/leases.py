"""The leases of a worker process's attempts in flight, extended together in one statement per beat.

With one heartbeat per attempt, a process running 128 attempts that wait on a slow model sends
64 UPDATEs a second (one per attempt every ATTEMPT_HEARTBEAT_SECONDS) and needs a database
connection per attempt while it waits. Here each attempt holds a ``Lease``; between its steps it
calls ``Lease.still_ours``, and whichever attempt finds the beat due extends the leases of *all*
the process's attempts in flight in one UPDATE (apps.attempts.services.attempts_heartbeat) and
tells each attempt that is no longer ours (lease lost, campaign cancelled) through its lease.

No thread of its own: the beat runs on an attempt's own thread and connection, so an attempt run
inline (eager Celery, tests) beats exactly as before, inside its caller's transaction.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

Extend = Callable[[list[int], str], set[int]]  # (attempt ids, worker) -> the ids still ours


class Lease:
    """One attempt's claim on its row, kept alive by the process's ``Leases``."""

    def __init__(self, leases: Leases, attempt_id: int, worker: str, every_s: float) -> None:
        self._leases = leases
        self.attempt_id = attempt_id
        self.worker = worker
        self.every_s = every_s
        self.lost = threading.Event()

    def still_ours(self) -> bool:
        """False once the attempt is no longer ours; beats for every attempt in flight when one is due."""
        self._leases.beat_if_due(self.worker, self.every_s)
        return not self.lost.is_set()

    def release(self) -> None:
        self._leases.drop(self)


class Leases:
    """The attempts in flight in this process, by worker identity."""

    def __init__(self, extend: Extend) -> None:
        self._extend = extend
        self._held: dict[str, dict[int, Lease]] = {}
        self._lock = threading.Lock()
        self._beating = threading.Lock()
        self._last_beat: dict[str, float] = {}

    def hold(self, attempt_id: int, worker: str, *, every_s: float) -> Lease:
        """Hold ``attempt_id`` (claimed by ``worker``); its lease is extended at least every ``every_s``."""
        lease = Lease(self, attempt_id, worker, every_s)
        with self._lock:
            self._held.setdefault(worker, {})[attempt_id] = lease
            self._last_beat.setdefault(worker, time.monotonic())
        return lease

    def drop(self, lease: Lease) -> None:
        with self._lock:
            held = self._held.get(lease.worker, {})
            if held.get(lease.attempt_id) is lease:
                del held[lease.attempt_id]

    def in_flight(self) -> int:
        with self._lock:
            return sum(len(held) for held in self._held.values())

    def beat_if_due(self, worker: str, every_s: float) -> None:
        """Extend every held lease of ``worker`` if a beat is due and no other thread is beating."""
        if time.monotonic() - self._last_beat.get(worker, 0.0) < every_s:
            return
        if not self._beating.acquire(blocking=False):
            return  # another attempt is beating for all of us right now
        try:
            with self._lock:
                if time.monotonic() - self._last_beat.get(worker, 0.0) < every_s:
                    return
                self._last_beat[worker] = time.monotonic()
                leases = dict(self._held.get(worker, {}))
            if not leases:
                return
            try:
                kept = self._extend(sorted(leases), worker)
            except Exception:  # a failed beat loses nothing yet: leases last several beats
                log.warning("extending %s leases failed", len(leases), exc_info=True)
                return
            for attempt_id, lease in leases.items():
                if attempt_id not in kept:
                    lease.lost.set()
        finally:
            self._beating.release()


_process_leases: Leases | None = None
_process_lock = threading.Lock()


def process_leases(extend: Extend) -> Leases:
    """This process's ``Leases`` (created on first use)."""
    global _process_leases
    with _process_lock:
        if _process_leases is None:
            _process_leases = Leases(extend)
        return _process_leases


def _forget_after_fork() -> None:
    """A forked child (prefork pool) holds none of its parent's attempts."""
    global _process_leases, _process_lock
    _process_leases, _process_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
