from django.apps import AppConfig


class RegradeConfig(AppConfig):
    name = "apps.regrade"
    label = "regrade"
    verbose_name = "Re-grading stored attempts (versioned verdicts, impact reports)"
