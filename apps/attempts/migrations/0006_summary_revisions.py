"""A per-campaign summary revision kept by database triggers on campaigns_tasksummary: bumped by every
write that changes one of the campaign's summary rows — a count (as SummaryVersion, migration 0005),
its updated_at (every recount writes it) or its signatures_at (a signature backfill) — so caches of
what is computed from the campaign's failure signatures (the triage cluster index) read one small
row per campaign instead of aggregating every summary row.

PostgreSQL: statement-level triggers with transition tables, one upsert per campaign and statement.
SQLite (no statement-level triggers): row-level triggers, guarded by WHEN so an update that changes
none of these columns is no bump.
"""

from django.db import migrations, models

# Every column the triage stamps read before this counter existed (max updated_at, max
# signatures_at, rows, n_done, n_pass) and every count: a change in any of them is a new revision.
WATCHED = (
    "campaign_id",
    "task_id",
    "n_done",
    "n_pass",
    "n_infra_error",
    "n_unjudged",
    "n_cancelled",
    "n_clean_looking",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "eval_tokens",
    "agent_cost",
    "eval_cost",
    "unpriced_attempts",
    "updated_at",
    "signatures_at",
)
REVISIONS = "campaigns_summaryrevision"
SUMMARIES = "campaigns_tasksummary"
_UPSERT_TAIL = f"ON CONFLICT (campaign_id) DO UPDATE SET revision = {REVISIONS}.revision + 1"


def _changed(new: str, old: str) -> str:
    return " OR ".join(f"{new}.{column} IS DISTINCT FROM {old}.{column}" for column in WATCHED)


def _postgresql() -> tuple[list[str], list[str]]:
    sources = {
        "insert": "n.campaign_id, 1 FROM new_rows n",
        "delete": "o.campaign_id, 1 FROM old_rows o",
        # An update that moved a row to another campaign bumps both (the UNION of old and new ids).
        "update": (
            "campaign_id, 1 FROM (SELECT n.campaign_id FROM new_rows n JOIN old_rows o ON o.id = n.id "
            f"WHERE {_changed('n', 'o')} UNION SELECT o.campaign_id FROM new_rows n JOIN old_rows o "
            f"ON o.id = n.id WHERE n.campaign_id <> o.campaign_id) moved"
        ),
    }
    referencing = {
        "insert": "REFERENCING NEW TABLE AS new_rows",
        "delete": "REFERENCING OLD TABLE AS old_rows",
        "update": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    }
    forward, backward = [], []
    for operation, source in sources.items():
        name = f"{REVISIONS}_on_{operation}"
        forward.append(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"INSERT INTO {REVISIONS} (campaign_id, revision) "
            f"SELECT DISTINCT {source} {_UPSERT_TAIL}; RETURN NULL; END $$"
        )
        forward.append(
            f"CREATE TRIGGER {name} AFTER {operation.upper()} ON {SUMMARIES} {referencing[operation]} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {name}()"
        )
        backward += [f"DROP TRIGGER IF EXISTS {name} ON {SUMMARIES}", f"DROP FUNCTION IF EXISTS {name}()"]
    return forward, backward


def _sqlite() -> tuple[list[str], list[str]]:
    def trigger(operation: str, row: str, when: str = "") -> str:
        guard = f" WHEN {when}" if when else ""
        return (
            f"CREATE TRIGGER {REVISIONS}_on_{operation} AFTER {operation.upper()} ON {SUMMARIES} "
            f"FOR EACH ROW{guard} BEGIN INSERT INTO {REVISIONS} (campaign_id, revision) "
            f"VALUES ({row}.campaign_id, 1) {_UPSERT_TAIL}; END"
        )

    forward = [
        trigger("insert", "NEW"),
        trigger("delete", "OLD"),
        trigger("update", "NEW", when=_changed("NEW", "OLD")),
        # A row moved to another campaign changes the old campaign's clusters too.
        (
            f"CREATE TRIGGER {REVISIONS}_on_move AFTER UPDATE ON {SUMMARIES} FOR EACH ROW "
            f"WHEN NEW.campaign_id <> OLD.campaign_id BEGIN INSERT INTO {REVISIONS} (campaign_id, revision) "
            f"VALUES (OLD.campaign_id, 1) {_UPSERT_TAIL}; END"
        ),
    ]
    backward = [
        f"DROP TRIGGER IF EXISTS {REVISIONS}_on_{name}" for name in ("insert", "delete", "update", "move")
    ]
    return forward, backward


def create_triggers(apps, schema_editor):
    forward, _ = _postgresql() if schema_editor.connection.vendor == "postgresql" else _sqlite()
    for statement in forward:
        schema_editor.execute(statement)


def drop_triggers(apps, schema_editor):
    _, backward = _postgresql() if schema_editor.connection.vendor == "postgresql" else _sqlite()
    for statement in backward:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("attempts", "0005_summary_versions")]

    operations = [
        migrations.CreateModel(
            name="SummaryRevision",
            fields=[
                ("campaign_id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("revision", models.BigIntegerField(default=0)),
            ],
            options={"db_table": "campaigns_summaryrevision"},
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
