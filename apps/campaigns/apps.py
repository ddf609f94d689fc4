from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.campaigns"
    label = "campaigns"

    def ready(self) -> None:
        from apps.campaigns import demo, signals  # noqa: F401  (demo steps; worker start-up sweep)
