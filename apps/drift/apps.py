from django.apps import AppConfig


class DriftConfig(AppConfig):
    name = "apps.drift"
    label = "drift"
    verbose_name = "Drift watch"

    def ready(self) -> None:
        from apps.core.navigation import register_nav_item

        register_nav_item("drift", url_name="drift:list", label="Drift")
