from django.apps import AppConfig
from django.contrib.auth import get_user_model
from django.db.models.signals import m2m_changed


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"
    verbose_name = "Core: accounts, teams, health"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.core.access import ROLE_RANK_ATTRIBUTE  # noqa: PLC0415 — imports models: apps not ready when apps.py loads

        def forget_role_rank(sender, instance, action, **kwargs) -> None:
            if action.startswith("post_"):
                instance.__dict__.pop(ROLE_RANK_ATTRIBUTE, None)

        m2m_changed.connect(
            forget_role_rank,
            sender=get_user_model().groups.through,
            weak=False,
            dispatch_uid="core-role-rank",
        )
