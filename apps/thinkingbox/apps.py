from django.apps import AppConfig


class ThinkingboxConfig(AppConfig):
    """ThinkingBox-Bench import commands and services (no tables of its own)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.thinkingbox"
    label = "thinkingbox"
