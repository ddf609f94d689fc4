from django.apps import AppConfig


class GatesConfig(AppConfig):
    name = "apps.gates"
    label = "gates"
    verbose_name = "Release gate"
