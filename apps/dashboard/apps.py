from django.apps import AppConfig

from apps.core.navigation import register_nav_item


class DashboardConfig(AppConfig):
    name = "apps.dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"

    def ready(self) -> None:
        register_nav_item("suites", url_name="dashboard:suites", label="Suites")
