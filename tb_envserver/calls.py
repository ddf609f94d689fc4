"""How the server runs the environment's resets and steps: inline and reset-queued, or in threads."""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tb_engine.training.environment import Environment

BLOCKING_THREADS = 64  # one per concurrently waiting reset/step of a blocking environment


class ResetQueue:
    """Resets wait here and start one per event-loop pass, after the steps that have arrived.

    ``submit`` queues a reset and returns the future of its answer; the first reset of an empty
    queue schedules ``_start_one``, which starts one episode and, while more wait, schedules itself
    again behind everything already ready to run (the steps that arrived meanwhile). No reset
    starves: one is started on every pass.
    """

    def __init__(self) -> None:
        self._waiting: deque[tuple[asyncio.Future[dict[str, Any]], Callable[[], dict[str, Any]]]] = deque()

    def submit(self, start: Callable[[], dict[str, Any]]) -> asyncio.Future[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._waiting.append((future, start))
        if len(self._waiting) == 1:
            loop.call_soon(self._start_one)
        return future

    def _start_one(self) -> None:
        future, start = self._waiting.popleft()
        if self._waiting:
            future.get_loop().call_soon(self._start_one)
        if future.cancelled():  # the client went away while it waited
            return
        try:
            future.set_result(start())
        except Exception as exc:  # EnvError or a harness bug: the caller answers with it
            future.set_exception(exc)


class Calls:
    """Runs the environment's resets and steps: inline on the loop (CPU-only episodes, resets
    through ``ResetQueue``), or in a thread pool when the environment is ``blocking``."""

    def __init__(self, env: Environment, threads: int = BLOCKING_THREADS):
        self.env = env
        self.resets = ResetQueue()
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="episode") if env.blocking else None

    async def reset(self, **fields: Any) -> dict[str, Any]:
        if self._pool is None:
            return await self.resets.submit(functools.partial(self.env.reset, **fields))
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, functools.partial(self.env.reset, **fields)
        )

    async def run(self, call: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        """A step, close or other episode call."""
        if self._pool is None:
            return call(*args)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call, *args)
