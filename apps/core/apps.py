from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"
    verbose_name = "Core: accounts, teams, health"
    default_auto_field = "django.db.models.BigAutoField"
