from django.apps import AppConfig


class ThinkingboxConfig(AppConfig):
    """ThinkingBox-Bench import commands and services; the search-service setting of imported suites."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.thinkingbox"
    label = "thinkingbox"
