"""The watch form: what to run (agent, suite, tasks, N), when (interval or crontab), against what baseline."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from apps.agents.models import AgentConfig
from apps.campaigns.models import Campaign
from apps.core.models import Team
from apps.drift.schedule import ScheduleError, check_schedule
from apps.suites.models import Suite


class WatchForm(forms.Form):
    name = forms.CharField(max_length=200)
    team = forms.ModelChoiceField(queryset=Team.objects.none())
    agent = forms.ModelChoiceField(queryset=AgentConfig.objects.all())
    suite = forms.ModelChoiceField(queryset=Suite.objects.all())
    domains = forms.CharField(required=False, help_text="Comma-separated domain names (empty: every domain).")
    task_ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One task id per line (empty: all).",
    )
    n_attempts = forms.IntegerField(min_value=1, max_value=200, initial=5, label="Attempts per task (N)")
    interval_minutes = forms.IntegerField(min_value=1, required=False, label="Every N minutes")
    cron = forms.CharField(
        max_length=100, required=False, help_text="Or a crontab: minute hour day month weekday"
    )
    baseline = forms.ModelChoiceField(
        queryset=Campaign.objects.none(),
        required=False,
        help_text="Empty: the first run becomes the baseline.",
    )
    probe_minutes = forms.IntegerField(
        min_value=0, initial=60, label="Probe the endpoint every N minutes", help_text="0: never"
    )
    webhook = forms.BooleanField(required=False, initial=True, label="Post alerts to the webhook")

    def __init__(self, *args, teams, campaigns, **kwargs):
        super().__init__(*args, **kwargs)
        # self.fields holds copies of the fields declared above: each keeps its declared class.
        cast(forms.ModelChoiceField, self.fields["team"]).queryset = teams
        cast(forms.ModelChoiceField, self.fields["baseline"]).queryset = Campaign.objects.filter(
            pk__in=[c.pk for c in campaigns]
        )

    def clean(self) -> dict[str, Any]:
        super().clean()  # Form.clean returns cleaned_data
        data = self.cleaned_data
        try:
            check_schedule(interval_minutes=data.get("interval_minutes"), cron=data.get("cron") or "")
        except ScheduleError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    def selected_tasks(self):
        """The chosen tasks of the suite (None: the whole suite)."""
        suite = self.cleaned_data["suite"]
        domains = [d.strip() for d in self.cleaned_data["domains"].split(",") if d.strip()]
        ids = [line.strip() for line in self.cleaned_data["task_ids"].splitlines() if line.strip()]
        if not domains and not ids:
            return None
        tasks = suite.tasks.all()
        if domains:
            tasks = tasks.filter(domain__name__in=domains)
        if ids:
            tasks = tasks.filter(task_id__in=ids)
        return list(tasks)
