from django.apps import AppConfig


class FiguresConfig(AppConfig):
    name = "apps.figures"
    label = "figures"
    verbose_name = "Figures (SPEC §5 metrics of campaigns)"

    def ready(self) -> None:
        # Registered in every process: campaigns sends figures.refresh by name, and eager mode
        # (tests, the embedded worker) runs it inline only where it is registered.
        from apps.figures import tasks  # noqa: F401, PLC0415 — the task imports models: apps not ready when apps.py loads
