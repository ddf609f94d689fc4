"""The web tier's gunicorn settings: used by docker/compose.yaml, the Dockerfile and bench/dashboard_concurrency.py.

gthread workers: a dashboard request spends part of its time waiting on PostgreSQL, so each process
serves several at once (threads), and processes give the pages more than one core. Figures every
viewer shares are cached per process (apps.figures.tables.cached, keyed by the campaigns' summary
stamps), so a handful of processes with more threads each beats many single-threaded ones: fewer
cold caches. Size: WEB_WORKERS ≈ the cores the web container may use (2–4 per core at most),
WEB_THREADS 8; PostgreSQL needs WEB_WORKERS × WEB_THREADS connections (docs/operations.md).
"""

import os

bind = os.environ.get("WEB_BIND", "0.0.0.0:8000")
worker_class = "gthread"
workers = int(os.environ.get("WEB_WORKERS", "4"))
threads = int(os.environ.get("WEB_THREADS", "8"))
# Connections waiting for a thread: a burst of a few hundred queues here instead of being refused.
backlog = int(os.environ.get("WEB_BACKLOG", "2048"))
timeout = int(os.environ.get("WEB_TIMEOUT", "120"))
keepalive = 5
accesslog = os.environ.get("WEB_ACCESS_LOG", "-")
