from django.apps import AppConfig


class AttemptsConfig(AppConfig):
    """The attempt record: claim, run result, record, recount, sign, hand the slot on; summaries and signatures."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.attempts"
    label = "attempts"
