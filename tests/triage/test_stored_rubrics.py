"""The rubric answers triage reads (drilldown panel, human verdicts) come back typed and version-checked."""

from __future__ import annotations

import pytest

from apps.attempts.models import Attempt
from apps.attempts.selectors.results import StoredResultError
from apps.attempts.selectors.reviewed_attempts import stored_rubrics
from tb_engine.results import RubricResult
from tests.triage.conftest import T2

pytestmark = pytest.mark.django_db

QUESTION = "Does the reply say the manager has to approve the request first?"


def test_stored_rubrics_reads_the_answers_typed(signed_campaign):
    campaign = signed_campaign(
        [(T2, 0, {"rubrics": [RubricResult(QUESTION, True, "said so"), RubricResult("Polite?", None)]})]
    )
    attempt = campaign.attempts.get()

    assert stored_rubrics(attempt_id=attempt.pk) == [
        RubricResult(QUESTION, True, "said so"),
        RubricResult("Polite?", None, ""),
    ]


def test_stored_rubrics_of_an_attempt_without_a_result_is_empty(signed_campaign):
    attempt = signed_campaign([(T2, 0, {})]).attempts.get()
    Attempt.objects.filter(pk=attempt.pk).update(result={})

    assert stored_rubrics(attempt_id=attempt.pk) == []


def test_stored_rubrics_refuses_an_unknown_format_naming_the_attempt(signed_campaign):
    attempt = signed_campaign([(T2, 0, {"rubrics": [RubricResult(QUESTION, True)]})]).attempts.get()
    Attempt.objects.filter(pk=attempt.pk).update(result={**attempt.result, "format_version": 99})

    with pytest.raises(StoredResultError) as raised:
        stored_rubrics(attempt_id=attempt.pk)

    assert str(raised.value) == (
        f"attempt {attempt.pk}: stored result (format version 99): field format_version "
        "is 99, a format this engine does not read (it reads version 1)"
    )


def test_stored_rubrics_names_a_malformed_answer(signed_campaign):
    attempt = signed_campaign([(T2, 0, {"rubrics": [RubricResult(QUESTION, True)]})]).attempts.get()
    Attempt.objects.filter(pk=attempt.pk).update(
        result={**attempt.result, "rubrics": [{"question": QUESTION, "answer": "yes"}]}
    )

    with pytest.raises(StoredResultError) as raised:
        stored_rubrics(attempt_id=attempt.pk)

    assert str(raised.value) == (
        f"attempt {attempt.pk}: stored result (format version 1): field rubrics[0].answer "
        "must be a boolean or null, got string"
    )
