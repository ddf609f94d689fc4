from django.apps import AppConfig

from apps.core.glossary import register_glossary
from apps.core.navigation import register_nav_item


class DashboardConfig(AppConfig):
    name = "apps.dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"

    def ready(self) -> None:
        from apps.figures.selectors import GLOSSARY_BY_SLUG  # noqa: PLC0415 — imports models: apps not ready when apps.py loads

        register_nav_item("suites", url_name="dashboard:suites", label="Suites")
        # The frame's `term` popovers link to the glossary page this app serves.
        register_glossary(terms=GLOSSARY_BY_SLUG, page_url_name="dashboard:glossary")
