"""Create one auth group per role (names must match apps.core.roles.Role)."""

from django.db import migrations

ROLE_GROUP_NAMES = ["viewer", "triager", "operator", "admin"]


def create_role_groups(apps, schema_editor):
    group_model = apps.get_model("auth", "Group")
    for name in ROLE_GROUP_NAMES:
        group_model.objects.get_or_create(name=name)


def delete_role_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLE_GROUP_NAMES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_role_groups, delete_role_groups)]
