"""Worker start-up: re-queue attempts of dead predecessors, warm suites, the LLM client and connections."""

from __future__ import annotations

import logging
import sys
import threading

from celery.concurrency.solo import TaskPool as SoloPool
from celery.concurrency.thread import TaskPool as ThreadsPool
from celery.signals import worker_init, worker_process_init, worker_ready
from django.conf import settings
from django.db import connection

from apps.attempts.services import attempt_claim_prepare
from apps.campaigns.services import campaigns_sweep
from apps.core.services import record_worker_heartbeat
from apps.worker.connections import release_connections_while_waiting
from apps.worker.endpoint_gate import install_endpoint_gate
from apps.worker.execution import warm_builtin_suites, warm_mcp_servers
from apps.worker.tasks import memory_budget
from tb_engine.thinkingbox.mcp_pool import set_memory_guard

log = logging.getLogger(__name__)


@worker_ready.connect
def _requeue_dead_predecessors(**_kwargs) -> None:
    try:
        requeued = campaigns_sweep(same_host_dead_only=True)
    except Exception:  # the worker must start even if the sweep fails; the periodic sweep retries
        log.exception("start-up sweep failed")
        return
    if requeued:
        log.warning("re-queued %s attempts of dead workers", requeued)


@worker_ready.connect
def _beat_when_ready(sender=None, **_kwargs) -> None:
    """Count as alive from the moment messages are taken (beat's first heartbeat task is a minute away)."""
    try:
        record_worker_heartbeat(hostname=sender.hostname)
    except Exception:  # the worker must start even if the database is briefly away
        log.exception("recording the start-up heartbeat failed")
    finally:
        connection.close()


@worker_ready.connect
@worker_process_init.connect
def _warm_suites(**_kwargs) -> None:
    """Parse built-in suites before the first message arrives (prefork children and thread pools)."""
    try:
        warm_builtin_suites()
    except Exception:
        log.exception("warming built-in suites failed")
    finally:
        connection.close()  # a prefork child must not keep a connection opened before its first task


@worker_ready.connect
@worker_process_init.connect
def _warm_mcp_servers(sender=None, **_kwargs) -> None:
    """Start the imported MCP domains' server pools where attempts run: each prefork child, or the
    threads/solo worker process itself (a prefork parent runs no attempts)."""
    if not settings.THINKINGBOX_MCP_WARM:
        return
    pool = getattr(sender, "pool", None)
    if pool is not None and not isinstance(pool, (ThreadsPool, SoloPool)):
        return  # worker_ready in a prefork parent
    try:
        warm_mcp_servers()
    except Exception:
        log.exception("warming MCP servers failed")
    finally:
        connection.close()


@worker_init.connect
@worker_process_init.connect
def _bound_mcp_pools_by_memory(**_kwargs) -> None:
    """Past the worker's memory budget (TB_WORKER_MEMORY_MB), warm MCP pools no attempt uses are closed."""
    set_memory_guard(memory_budget().over)


@worker_init.connect
@worker_process_init.connect
def _install_endpoint_gate(**_kwargs) -> None:
    """Every process that runs attempts shares its endpoints' caps and 429 pauses through Redis."""
    install_endpoint_gate()


@worker_init.connect
def _set_switch_interval(**_kwargs) -> None:
    """TB_WORKER_SWITCH_INTERVAL: how long a thread may hold the GIL before another one that waits gets it.

    A worker of a hundred threads that mostly wait on a model hands the GIL over at every answer;
    a longer interval lets the thread grading an attempt finish its slice first.
    """
    if settings.WORKER_SWITCH_INTERVAL > 0:
        sys.setswitchinterval(settings.WORKER_SWITCH_INTERVAL)


@worker_init.connect
def _import_llm_client(**_kwargs) -> None:
    """Import the OpenAI SDK in the worker's main process, before the pool starts (prefork children inherit it).

    Imported lazily, it cost the first attempts of a fresh worker about a second and a half of
    CPU under the GIL (pydantic models of the whole SDK), all 64 first attempts of a threads
    pool stalled behind it. Web processes never pay for it.
    """
    try:
        import openai  # noqa: PLC0415 — deliberately at worker start only: web processes never pay for the SDK (~1.5 s)

        import tb_engine.llm.client  # noqa: F401, PLC0415 — as above: this warm-up runs in workers only

        # The SDK imports its HTTP transport stack (httpcore, anyio/trio probes) on first client.
        openai.OpenAI(base_url="http://127.0.0.1/v1", api_key="warm-up", max_retries=0).close()
    except Exception:  # an installation without the SDK still runs simulated agents
        log.warning("could not import the LLM client at worker start", exc_info=True)


@worker_ready.connect
def _release_connections_of_many_attempts(sender=None, **_kwargs) -> None:
    """A threads pool larger than WORKER_HOLD_CONNECTIONS_UP_TO gives connections back while attempts wait."""
    pool = getattr(sender, "pool", None)
    many = isinstance(pool, ThreadsPool) and pool.limit > settings.WORKER_HOLD_CONNECTIONS_UP_TO
    release_connections_while_waiting(many)


@worker_ready.connect
def _connect_pool_threads(sender=None, **_kwargs) -> None:
    """Threads pool: open every pool thread's database connection (and prepare the claim) up front.

    Connections are per thread; opened lazily, the first message of each of a fresh worker's
    threads waits for its connection while all the others open theirs under the same GIL.
    """
    pool = getattr(sender, "pool", None)
    if not isinstance(pool, ThreadsPool) or pool.limit < 2 or not settings.WORKER_CONNECT_THREADS:
        return
    if pool.limit > settings.WORKER_HOLD_CONNECTIONS_UP_TO:
        return  # its attempts give their connections back while they wait: nothing to open ahead
    # Every job waits for all the others, so each lands on its own thread: the pool only starts a
    # new thread while none is idle.
    barrier = threading.Barrier(pool.limit, timeout=30)

    def connect() -> None:
        try:
            attempt_claim_prepare()
        except Exception:  # the first task opens it instead
            log.warning("opening a pool thread's database connection failed", exc_info=True)
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass

    for _ in range(pool.limit):
        pool.apply_async(connect, callback=_ignore_result)


def _ignore_result(_result) -> None:
    """The pool hands every job's return value to a callback; warming returns nothing."""
