from django.apps import AppConfig

from apps.core.navigation import register_nav_item


class AdaptiveConfig(AppConfig):
    """Calibrations (item response models per suite), adaptive campaigns' dispatcher and estimates."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.adaptive"
    label = "adaptive"
    verbose_name = "Adaptive campaigns"

    def ready(self) -> None:
        # Registered in every process: campaigns sends adaptive.dispatch by name, and eager mode
        # (tests, run_task) runs it inline only where it is registered.
        from apps.adaptive import demo, tasks  # noqa: F401, PLC0415 — demo step and Celery tasks import models: apps not ready when apps.py loads

        register_nav_item("adaptive", url_name="adaptive:suites", label="Calibration")
