"""Stamp ``format_version: 1`` into every stored result written before the format had a version.

Those results have exactly version 1's shape (tb_engine/results.py: UNVERSIONED_FORMAT), so the
stamp changes no meaning: it makes every stored result say which format it is in. One set-based
UPDATE per database, because the attempt table is the largest in the system (a 200k-attempt
comparison is common) and a Python loop would load and rewrite every transcript. Empty results
(``{}``: queued, running or cancelled attempts) stay empty. Backwards, the key is removed where it
says 1 — a later format must not be left looking like version 1 to code that predates versions.
"""

from django.db import migrations

# PostgreSQL: Attempt.result is a jsonb column (Django's JSONField). The statements take no
# parameters, so the jsonb ``?`` operator is not read as a placeholder.
POSTGRESQL_STAMP = """
    UPDATE campaigns_attempt
    SET result = result || '{"format_version": 1}'::jsonb
    WHERE jsonb_typeof(result) = 'object'
      AND result <> '{}'::jsonb
      AND NOT (result ? 'format_version')
"""
POSTGRESQL_UNSTAMP = """
    UPDATE campaigns_attempt
    SET result = result - 'format_version'
    WHERE jsonb_typeof(result) = 'object' AND result -> 'format_version' = '1'::jsonb
"""
# SQLite stores JSONField as text; json() normalises it, so '{ }' counts as empty too.
SQLITE_STAMP = """
    UPDATE campaigns_attempt
    SET result = json_set(result, '$.format_version', 1)
    WHERE json_type(result) = 'object'
      AND json(result) <> '{}'
      AND json_type(result, '$.format_version') IS NULL
"""
SQLITE_UNSTAMP = """
    UPDATE campaigns_attempt
    SET result = json_remove(result, '$.format_version')
    WHERE json_type(result) = 'object'
      AND json_type(result, '$.format_version') = 'integer'
      AND json_extract(result, '$.format_version') = 1
"""
STATEMENTS = {
    "postgresql": (POSTGRESQL_STAMP, POSTGRESQL_UNSTAMP),
    "sqlite": (SQLITE_STAMP, SQLITE_UNSTAMP),
}


def _run(schema_editor, *, forward: bool) -> None:
    vendor = schema_editor.connection.vendor
    if vendor not in STATEMENTS:
        raise RuntimeError(
            f"no result format stamp for the {vendor} database (written for {', '.join(STATEMENTS)})"
        )
    stamp, unstamp = STATEMENTS[vendor]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(stamp if forward else unstamp)


def stamp_format_version(apps, schema_editor):
    _run(schema_editor, forward=True)


def remove_format_version(apps, schema_editor):
    _run(schema_editor, forward=False)


class Migration(migrations.Migration):
    dependencies = [("attempts", "0001_initial")]

    operations = [migrations.RunPython(stamp_format_version, remove_format_version, elidable=False)]
