from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    """Campaigns, their attempts and per-task summaries: launch, dispatch, claim, record, progress."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.campaigns"
    label = "campaigns"

    def ready(self) -> None:
        from apps.campaigns import demo  # noqa: F401, PLC0415 — registers the demo-campaigns step; imports models: apps not ready when apps.py loads
