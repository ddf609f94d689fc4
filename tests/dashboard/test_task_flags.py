"""Dashboard pages flag a non-discriminating task beside its id: the tasks grid, the task and attempt pages."""

from __future__ import annotations

import pytest

from apps.suites.models import Task

pytestmark = pytest.mark.django_db

FLAG = '<span class="badge task-flag" title="Suite validation: a do-nothing attempt passes this task, so a pass shows little">non-discriminating</span>'


@pytest.fixture
def idle_campaign(run_campaign):
    """A finished campaign over two tasks; the first one is non-discriminating."""
    campaign = run_campaign(tasks=2, n=1)
    idle, other = campaign.tasks.order_by("task_id")
    Task.objects.filter(pk=idle.pk).update(validation=Task.Validation.NON_DISCRIMINATING)
    return campaign, idle, other


def test_tasks_grid_flags_the_non_discriminating_row_only(client, bob, idle_campaign):
    campaign, idle, other = idle_campaign
    client.force_login(bob)

    html = client.get(f"/tasks/?c={campaign.pk}").content.decode()

    rows = {
        task.task_id: html.split(f">{task.task_id}</a>", 1)[1].split("</td>", 1)[0] for task in (idle, other)
    }
    assert rows == {idle.task_id: FLAG, other.task_id: ""}


def test_task_and_attempt_pages_flag_the_non_discriminating_task(client, bob, idle_campaign):
    campaign, idle, other = idle_campaign
    attempt = campaign.attempts.get(task=idle)
    client.force_login(bob)

    task_page = client.get(f"/tasks/{idle.pk}/").content.decode()
    other_page = client.get(f"/tasks/{other.pk}/").content.decode()
    attempt_page = client.get(f"/attempts/{attempt.pk}/").content.decode()

    assert f"<h1>{idle.task_id} {FLAG}</h1>" in task_page
    assert FLAG not in other_page
    assert f">{idle.task_id}</a>{FLAG} / " in attempt_page
