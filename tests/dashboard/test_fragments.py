"""The shared-fragment digest: equal contexts give equal keys, any shown change gives a new one."""

from __future__ import annotations

import dataclasses

import pytest

from apps.core.models import Team
from apps.dashboard.fragments import context_digest

pytestmark = pytest.mark.django_db


@dataclasses.dataclass
class _Row:
    team: Team
    label: str


def _teams() -> tuple[Team, Team]:
    return Team.objects.create(name="Support", slug="support"), Team.objects.create(name="Ops", slug="ops")


def test_contexts_built_the_same_way_from_fresh_reads_share_a_key():
    first, second = _teams()

    def built() -> dict:
        # What each request does: read the rows afresh and mention each in several places.
        teams = list(Team.objects.order_by("pk"))
        return {"rows": [_Row(teams[0], "a"), _Row(teams[1], "b")], "teams": teams}

    assert context_digest(built()) == context_digest(built())


def test_a_changed_field_of_a_row_met_twice_changes_the_digest():
    first, second = _teams()
    before = context_digest({"rows": [_Row(first, "a")], "teams": [first, second]})
    renamed = Team.objects.get(pk=first.pk)
    renamed.name = "Support (EU)"
    after = context_digest({"rows": [_Row(renamed, "a")], "teams": [renamed, second]})
    # Only the second mention is stale: it is a copy of its own, read in full.
    stale_second = context_digest({"rows": [_Row(renamed, "a")], "teams": [first, second]})
    assert before != after
    assert len({before, after, stale_second}) == 3


def test_lists_of_strings_digest_by_content_and_order():
    assert context_digest({"tasks": ["t1", "t2"]}) == context_digest({"tasks": ["t1", "t2"]})
    assert context_digest({"tasks": ["t1", "t2"]}) != context_digest({"tasks": ["t2", "t1"]})
    assert context_digest({"tasks": ["t1", "t2"]}) != context_digest({"tasks": ("t1", "t2")})
    assert context_digest({"tasks": ["t1"]}) != context_digest({"tasks": [1]})


def test_left_out_entries_do_not_enter_the_key():
    assert context_digest({"a": 1, "form": "x"}, leave_out=("form",)) == context_digest(
        {"a": 1, "form": "y"}, leave_out=("form",)
    )
