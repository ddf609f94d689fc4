from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.campaigns"
    label = "campaigns"

    def ready(self) -> None:
        from apps.campaigns import signals  # noqa: F401  (worker start-up sweeps stale attempts)
