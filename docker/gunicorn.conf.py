"""The web tier's gunicorn settings: used by docker/compose.yaml, the Dockerfile and bench/dashboard_concurrency.py.

gthread workers: a dashboard request spends part of its time waiting on PostgreSQL, so each process
serves several at once (threads), and processes give the pages more than one core. Figures every
viewer shares are cached per process (apps.figures.tables.cached, keyed by the campaigns' summary
stamps; one computation per key and process however many threads ask), so one process per core
beats many processes: a page is mostly Python (one core per process), and every extra process is
one more cold cache. A few threads, not many: the pages' queries now take ~2 ms of PostgreSQL, so
there is little waiting to overlap, and 16 threads fighting for one GIL cost CPU — on
bench/dashboard_concurrency.py (2 cores, 200 simultaneous requests) 4 threads served a warm burst
at 12–17 ms of server CPU per request and p95 2.1–2.5 s, 16 threads at 20–22 ms and 3.0 s.
Size: WEB_WORKERS = the cores the web tier may use (default: this machine's), WEB_THREADS 4 (raise
it when many long downloads run at once: each holds a thread); PostgreSQL needs WEB_WORKERS ×
WEB_THREADS connections (docs/operations.md "The web tier").
"""

import os

bind = os.environ.get("WEB_BIND", "0.0.0.0:8000")
worker_class = "gthread"
workers = int(os.environ.get("WEB_WORKERS") or os.cpu_count() or 2)
threads = int(os.environ.get("WEB_THREADS", "4"))
# Connections waiting for a thread: a burst of a few hundred queues here instead of being refused.
backlog = int(os.environ.get("WEB_BACKLOG", "2048"))
timeout = int(os.environ.get("WEB_TIMEOUT", "120"))
keepalive = 5
accesslog = os.environ.get("WEB_ACCESS_LOG", "-")


def post_worker_init(worker):
    """Import the views and compile the templates before this worker accepts a request (a fresh
    worker's first requests paid ~1 s of it while a burst waited; thinkingbox_web/warmup.py)."""
    from thinkingbox_web.warmup import warm_web_process  # noqa: PLC0415 — needs the app loaded (the worker's)

    warm_web_process()
