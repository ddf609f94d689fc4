"""The Celery app: configured from Django settings (CELERY_*), tasks discovered in every app."""

from __future__ import annotations

import functools
import logging
import os

import celery.worker.consumer
from celery import Celery, bootsteps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thinkingbox_web.settings")

app = Celery("thinkingbox_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
logger = logging.getLogger(__name__)
BROKER_RETRY_MAX_SECONDS = 2


class ResendLostMessages(bootsteps.StartStopStep):
    """Each time the worker's consumer (re)connects to the broker, ask for lost messages.

    A Redis broker restarted without persistence comes back empty; the task (apps.worker) re-sends
    the messages of attempts dispatched before it started, seconds after it is back instead of at
    the next redispatch sweep. Sent by name: this module loads before Django and the apps.
    """

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, c) -> None:
        try:
            c.app.send_task("worker.resend_lost")
        except Exception:  # never stop the consumer over it; the periodic sweep re-sends later
            logger.exception("could not ask for lost messages to be re-sent")


class Consumer(celery.worker.consumer.Consumer):
    """Celery's consumer, retrying a lost broker connection every second or two.

    Kombu's default waits 2, 4, 6 … up to 30 s between tries, so a worker could stay idle for
    half a minute after the broker came back.
    """

    def ensure_connected(self, conn):
        conn.ensure_connection = functools.partial(
            conn.ensure_connection, interval_start=1, interval_step=1, interval_max=BROKER_RETRY_MAX_SECONDS
        )
        return super().ensure_connected(conn)


app.steps["consumer"].add(ResendLostMessages)
