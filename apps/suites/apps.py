from django.apps import AppConfig


class SuitesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.suites"
    label = "suites"

    def ready(self) -> None:
        from apps.suites import demo  # noqa: F401, PLC0415 — registers the built-in-suite demo step; imports models: apps not ready when apps.py loads
