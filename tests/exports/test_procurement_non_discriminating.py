"""The procurement workbook's provenance states what each campaign did with non-discriminating tasks."""

from __future__ import annotations

import io

import pytest
from openpyxl import load_workbook

from apps.exports.procurement import build_workbook
from apps.suites.models import Task
from tests.triage.conftest import T1, T2

pytestmark = pytest.mark.django_db


def _provenance(campaign) -> dict:
    content, _ = build_workbook(campaigns=[campaign])
    sheet = load_workbook(io.BytesIO(content))["Methodology & provenance"]
    return {row[0].value: row[1].value for row in sheet.iter_rows(min_row=2)}


def test_procurement_provenance_says_the_campaign_includes_non_discriminating_tasks(summaries_campaign):
    campaign = summaries_campaign({T1: (4, 4), T2: (4, 1)}, name="Alpha", n=4)
    Task.objects.filter(task_id=T1).update(validation=Task.Validation.NON_DISCRIMINATING)

    assert _provenance(campaign)["  non-discriminating tasks"] == "includes 1 non-discriminating task"


def test_procurement_provenance_says_the_campaign_excluded_them(summaries_campaign):
    campaign = summaries_campaign({T2: (4, 1)}, name="Alpha", n=4)
    campaign.exclude_non_discriminating, campaign.non_discriminating_excluded = True, 3
    campaign.save(update_fields=["exclude_non_discriminating", "non_discriminating_excluded"])

    assert _provenance(campaign)["  non-discriminating tasks"] == "non-discriminating tasks excluded (3)"
