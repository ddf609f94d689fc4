from django.apps import AppConfig


class FiguresConfig(AppConfig):
    name = "apps.figures"
    label = "figures"
    verbose_name = "Figures (SPEC §5 metrics of campaigns)"
