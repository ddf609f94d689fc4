from django.apps import AppConfig


class SuitesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.suites"
    label = "suites"
