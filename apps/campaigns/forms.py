from __future__ import annotations

from django import forms

from apps.agents.models import AgentConfig, PriceSheet
from apps.core.models import Team
from apps.suites.models import Domain, Suite, Task

SCRIPTED_USER = "scripted"
KEYWORD_JUDGE = "keyword"


class CampaignLaunchForm(forms.Form):
    name = forms.CharField(max_length=200)
    team = forms.ModelChoiceField(queryset=Team.objects.none())
    agent = forms.ModelChoiceField(queryset=AgentConfig.objects.all())
    suite = forms.ModelChoiceField(queryset=Suite.objects.all())
    domains = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, help_text="None ticked: every domain."
    )
    tasks = forms.ModelMultipleChoiceField(
        queryset=Task.objects.none(),
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 8}),
        help_text="None chosen: every gradable task of the ticked domains.",
    )
    user_simulator = forms.ChoiceField(
        required=False,
        initial=SCRIPTED_USER,
        label="User simulator",
        help_text="Who plays the customer: the task's script or a model endpoint.",
    )
    judge = forms.ChoiceField(
        required=False,
        initial=KEYWORD_JUDGE,
        help_text="Who grades rubric questions: keyword matching or a model endpoint.",
    )
    n_attempts = forms.IntegerField(min_value=1, max_value=200, initial=20, label="Attempts per task (N)")
    seed = forms.IntegerField(initial=0)
    price_sheet = forms.ModelChoiceField(queryset=PriceSheet.objects.all(), required=False)
    adaptive = forms.BooleanField(
        required=False,
        help_text="Run a fraction of the N x tasks attempts, chosen by the suite's latest calibration; "
        "the full figures are estimated (labelled so).",
    )
    budget_share = forms.FloatField(
        min_value=0.01, max_value=1.0, initial=0.3, label="Adaptive: attempt budget (share of N x tasks)"
    )
    target_se = forms.FloatField(
        min_value=0.0,
        max_value=0.5,
        initial=0.005,
        label="Adaptive: target standard error (pass@1, all-N share)",
    )

    def __init__(self, *args, teams=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams if teams is not None else Team.objects.none()
        # One team: preselect it, so launching takes one choice fewer.
        if teams is not None and not self.is_bound and len(teams) == 1:
            self.fields["team"].initial = teams[0].pk
        self.fields["budget_share"].required = False
        self.fields["target_se"].required = False
        self.fields["domains"].choices = [
            (name, name) for name in Domain.objects.order_by("name").values_list("name", flat=True).distinct()
        ]
        self.fields["tasks"].queryset = Task.objects.select_related("domain").order_by("task_id")
        self.fields["tasks"].label_from_instance = lambda task: task.task_id
        endpoints = [
            (str(agent.pk), f"model: {agent.name} ({agent.model})")
            for agent in AgentConfig.objects.filter(kind=AgentConfig.Kind.OPENAI).exclude(model="")
        ]
        self.fields["user_simulator"].choices = [
            (SCRIPTED_USER, "scripted (the task's own turns)"),
            *endpoints,
        ]
        self.fields["judge"].choices = [(KEYWORD_JUDGE, "keyword rubric matching"), *endpoints]

    def chosen_tasks(self):
        """The suite's tasks the form selects: the chosen tasks, else all of the ticked domains (or all)."""
        data = self.cleaned_data
        tasks = data["suite"].tasks.all()
        if data.get("domains"):
            tasks = tasks.filter(domain__name__in=data["domains"])
        if data.get("tasks"):
            tasks = tasks.filter(pk__in=[task.pk for task in data["tasks"]])
        return tasks

    def clean(self):
        data = super().clean()
        suite, tasks = data.get("suite"), data.get("tasks")
        if suite is not None and tasks:
            foreign = sorted(task.task_id for task in tasks if task.suite_id != suite.pk)
            if foreign:
                self.add_error("tasks", f"not in suite {suite.name}: {', '.join(foreign)}")
        return data

    def endpoint(self, name: str) -> dict | None:
        """The user simulator or judge config: None (scripted / keyword) or an LLM endpoint of an agent."""
        value = self.cleaned_data.get(name)
        if value in (SCRIPTED_USER, KEYWORD_JUDGE, None, ""):
            return None
        agent = AgentConfig.objects.get(pk=int(value))
        config = {"kind": "llm", "model": agent.model, "base_url": agent.base_url}
        if agent.api_key_env:
            config["api_key_env"] = agent.api_key_env
        return config

    def adaptive_options(self) -> dict | None:
        """The campaign's adaptive option (None: a full campaign); the calibration is the suite's latest."""
        data = self.cleaned_data
        if not data.get("adaptive"):
            return None
        options = {"calibration": None}
        for name in ("budget_share", "target_se"):
            if data.get(name) is not None:
                options[name] = data[name]
        return options
