from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """Agent configurations and price sheets: what a campaign runs, and what its tokens cost."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.agents"
    label = "agents"

    def ready(self) -> None:
        from apps.agents import demo  # noqa: F401, PLC0415 — registers the price-sheet demo step; imports models: apps not ready when apps.py loads
