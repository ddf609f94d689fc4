"""The ThinkingBox state record (issue 29) and the per-call value log of two server states, by hand."""

from __future__ import annotations

import json

import pytest

from tb_engine.spec import TableSpec
from tb_engine.thinkingbox.effects import state_value_log
from tb_engine.thinkingbox.state_record import StateRecordError, rebuilt_result, state_digest, state_record

S0 = {
    "tickets": [
        {"id": "1", "status": "open", "tags": ["a"]},
        {"id": "2", "status": "open", "tags": []},
    ],
    "users": [{"id": "u1", "name": "Ann"}],
    "notes": [{"id": "n1", "text": "x"}],
}
# Ticket 2 solved, ticket 3 created, notes emptied by the server dropping the table, users untouched.
SR = {
    "tickets": [
        {"id": "1", "status": "open", "tags": ["a"]},
        {"id": "2", "status": "solved", "tags": []},
        {"id": "3", "status": "new", "tags": None},
    ],
    "users": [{"id": "u1", "name": "Ann"}],
}


def test_the_record_stores_only_changed_tables_as_s0_indexes_or_rows_and_rebuilds_sr_exactly():
    record = state_record(S0, SR)
    assert record["tables"] == {
        "tickets": [
            0,
            {"row": {"id": "2", "status": "solved", "tags": []}},
            {"row": {"id": "3", "status": "new", "tags": None}},
        ]
    }
    assert record["absent"] == ["notes"]
    assert (record["initial_digest"], record["result_digest"]) == (state_digest(S0), state_digest(SR))
    assert rebuilt_result(S0, record) == SR
    # Through a JSON column that reorders keys (jsonb) the record still rebuilds SR.
    reordered = json.loads(json.dumps(record, sort_keys=True))
    assert rebuilt_result(S0, reordered) == SR


def test_a_record_that_does_not_rebuild_the_attempts_sr_or_names_another_s0_is_refused():
    record = state_record(S0, SR)
    other_s0 = {**S0, "users": [{"id": "u1", "name": "Bob"}]}
    with pytest.raises(StateRecordError, match="S0 from the server now differs"):
        rebuilt_result(other_s0, record)
    tampered = json.loads(json.dumps(record))
    tampered["tables"]["tickets"][0] = 1  # S0's ticket 2 where SR has ticket 1
    with pytest.raises(StateRecordError, match="differs from the attempt's SR"):
        rebuilt_result(S0, tampered)
    tampered["tables"]["tickets"][0] = 7  # no such S0 row
    with pytest.raises(StateRecordError, match="neither an S0 row index nor a row"):
        rebuilt_result(S0, tampered)


def test_one_calls_value_log_names_inserts_deletes_and_each_changed_cell_with_its_values():
    specs = {
        "tickets": TableSpec("tickets", {"id": "text", "status": "text", "tags": "json"}, ("id",)),
        "notes": TableSpec("notes", {"id": "text", "text": "text"}, ("id",)),
        "users": TableSpec("users", {"id": "text", "name": "text"}, ("id",)),
    }
    assert state_value_log(4, S0, SR, specs) == [
        (4, "notes", "n1", None, "delete", None, None),
        (4, "tickets", "2", "status", "update", "open", "solved"),
        (4, "tickets", "3", None, "insert", None, None),
    ]
