"""task_states: a reused S0/SG entry only for exactly the same JSON, and SR built as snapshot_of builds it."""

from __future__ import annotations

from tb_engine.thinkingbox.declarations import NO_DECLARATIONS
from tb_engine.thinkingbox.effects import snapshot_of
from tb_engine.thinkingbox.task_states import build_task_states, table_texts

INITIAL = {
    "orders": [{"id": 1, "status": "open", "total": 10}, {"id": 2, "status": "open", "total": 5}],
    "notes": [{"id": "n1", "text": "hello"}],
    "tags": None,
}
GOLDEN = {
    "orders": [{"id": 1, "status": "closed", "total": 10}, {"id": 2, "status": "open", "total": 5}],
    "notes": [{"id": "n1", "text": "hello"}],
    "tags": [],
}


def _entry():
    return build_task_states(
        "shop", NO_DECLARATIONS, INITIAL, GOLDEN, table_texts(INITIAL), table_texts(GOLDEN)
    )


def test_result_snapshot_equals_the_built_one_and_shares_unchanged_tables():
    entry = _entry()
    result = {
        "orders": [{"id": 1, "status": "closed", "total": 10}, {"id": 2, "status": "open", "total": 5}],
        "notes": [{"id": "n1", "text": "hello"}, {"id": "n2", "text": "new"}],
    }
    snapshot = entry.result_snapshot(result, table_texts(result))
    assert snapshot == snapshot_of(result, entry.specs)
    assert snapshot.tables["orders"] is entry.golden.tables["orders"]  # as in SG
    assert snapshot.tables["tags"] is entry.initial.tables["tags"]  # missing = empty, as in S0
    assert snapshot.tables["notes"] is not entry.initial.tables["notes"]  # changed: built
    assert entry.initial == snapshot_of(INITIAL, entry.specs)
    assert entry.golden == snapshot_of(GOLDEN, entry.specs)


def test_an_entry_matches_only_the_same_text_and_declarations():
    entry = _entry()
    assert entry.matches(NO_DECLARATIONS, table_texts(INITIAL), table_texts(GOLDEN)) is True
    # Equal in Python (10 == 10.0) but not as JSON text: a miss, never a reuse.
    floated = {**INITIAL, "orders": [{"id": 1, "status": "open", "total": 10.0}, INITIAL["orders"][1]]}
    assert floated == INITIAL
    assert entry.matches(NO_DECLARATIONS, table_texts(floated), table_texts(GOLDEN)) is False
    other = NO_DECLARATIONS.with_extra({"orders": ["status"]}, "a test")
    assert entry.matches(other, table_texts(INITIAL), table_texts(GOLDEN)) is False
