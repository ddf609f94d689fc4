from django.apps import AppConfig


class TriageConfig(AppConfig):
    name = "apps.triage"
    label = "triage"
    verbose_name = "Triage"

    def ready(self) -> None:
        # Registered in every process (as apps.worker does): the suite page's button sends the
        # validation by name, and eager Celery (tests) runs a named task inline only when it is
        # registered here.
        from apps.triage import tasks  # noqa: F401, PLC0415 — imports models: apps not ready when apps.py loads
