"""A worker that starts re-queues attempts left running by dead workers on the same host."""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_init, worker_process_init, worker_ready

log = logging.getLogger(__name__)


@worker_ready.connect
def _requeue_dead_predecessors(**_kwargs) -> None:
    from apps.campaigns.services import attempts_sweep

    try:
        requeued = attempts_sweep(same_host_dead_only=True)
    except Exception:  # the worker must start even if the sweep fails; the periodic sweep retries
        log.exception("start-up sweep failed")
        return
    if requeued:
        log.warning("re-queued %s attempts of dead workers", requeued)


@worker_ready.connect
@worker_process_init.connect
def _warm_suites(**_kwargs) -> None:
    """Parse built-in suites before the first message arrives (prefork children and thread pools)."""
    from django.db import connection

    from apps.campaigns.execution import warm_builtin_suites

    try:
        warm_builtin_suites()
    except Exception:
        log.exception("warming built-in suites failed")
    finally:
        connection.close()  # a prefork child must not keep a connection opened before its first task


@worker_init.connect
def _import_llm_client(**_kwargs) -> None:
    """Import the OpenAI SDK in the worker's main process, before the pool starts (prefork children inherit it).

    Imported lazily, it cost the first attempts of a fresh worker about a second and a half of
    CPU under the GIL (pydantic models of the whole SDK), all 64 first attempts of a threads
    pool stalled behind it. Web processes never pay for it.
    """
    try:
        import openai

        import tb_engine.llm.client  # noqa: F401

        # The SDK imports its HTTP transport stack (httpcore, anyio/trio probes) on first client.
        openai.OpenAI(base_url="http://127.0.0.1/v1", api_key="warm-up", max_retries=0).close()
    except Exception:  # an installation without the SDK still runs simulated agents
        log.warning("could not import the LLM client at worker start", exc_info=True)


@worker_ready.connect
def _connect_pool_threads(sender=None, **_kwargs) -> None:
    """Threads pool: open every pool thread's database connection (and prepare the claim) up front.

    Connections are per thread; opened lazily, the first message of each of a fresh worker's
    threads waits for its connection while all the others open theirs under the same GIL.
    """
    pool = getattr(sender, "pool", None)
    executor, limit = getattr(pool, "executor", None), getattr(pool, "limit", 0) or 0
    if executor is None or limit < 2:
        return
    from django.conf import settings

    if not getattr(settings, "WORKER_CONNECT_THREADS", True):
        return
    # Every job waits for all the others: the executor only starts a new thread while none is idle.
    barrier = threading.Barrier(limit, timeout=30)

    def connect() -> None:
        from django.db import connection

        from apps.campaigns.hotpath import warm_connection

        try:
            warm_connection(connection)
        except Exception:  # the first task opens it instead
            log.warning("opening a pool thread's database connection failed", exc_info=True)
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass

    for _ in range(limit):
        executor.submit(connect)
