from django.apps import AppConfig

from apps.core.navigation import register_nav_item


class DriftConfig(AppConfig):
    name = "apps.drift"
    label = "drift"
    verbose_name = "Drift watch"

    def ready(self) -> None:
        # Registered in every process (as apps.worker does): the webhook is sent by name, and eager
        # Celery (tests) runs a named task inline only when it is registered here.
        from apps.drift import tasks  # noqa: F401, PLC0415 — imports models: apps not ready when apps.py loads

        register_nav_item("drift", url_name="drift:list", label="Drift")
