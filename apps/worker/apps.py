from django.apps import AppConfig


class WorkerConfig(AppConfig):
    """The worker runtime: Celery tasks that run stored attempts through the engine (no tables of its own)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.worker"
    label = "worker"

    def ready(self) -> None:
        # The tasks register in every process, not only in workers: campaigns sends them by name,
        # and a name resolves to the registered task (so eager mode runs it inline) only when the
        # task is registered here. The signals tune a worker's start-up.
        from apps.worker import signals, tasks  # noqa: F401, PLC0415 — they import models: apps not ready when apps.py loads
