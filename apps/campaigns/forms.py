from __future__ import annotations

from typing import Any, cast

from django import forms
from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db.models import Q

from apps.agents.models import AgentConfig, PriceSheet
from apps.campaigns.evaluators import EvaluatorConfigError, evaluator_configs
from apps.core.models import Team
from apps.suites.models import Domain, Suite, Task
from tb_engine.agents.harness_checks import CHECKS, LABELS
from tb_engine.faults import FAULT_KINDS, FaultPlan, FaultPlanError
from tb_engine.llm_judge import JUDGE_INSTRUCTIONS
from tb_engine.users.llm_user import DEFAULT_INSTRUCTIONS

# Agents offered even before their configuration row exists (created on first use).
BUILTIN_AGENTS = [("spec:golden", "golden (harness self-check, not a model)")] + [
    (f"spec:check:{kind}", LABELS[kind]) for kind in CHECKS
]


def agent_choices(teams) -> list[tuple[str, list[tuple[str, str]]]]:
    """The agent select: shared configurations and the teams' own (with their label), then the
    built-in harness checks."""
    stored, present = [], set()
    for agent in AgentConfig.objects.filter(Q(team__isnull=True) | Q(team__in=teams)).order_by("name"):
        badge = f" ({agent.badge_text})" if agent.badge_text and agent.badge_text not in agent.name else ""
        stored.append((f"pk:{agent.pk}", f"{agent.name}{badge}"))
        present.add(agent.engine_spec)
    builtin = [
        (value, label) for value, label in BUILTIN_AGENTS if value.removeprefix("spec:") not in present
    ]
    groups = [("Agent configurations", stored)]
    if builtin:
        groups.append(("Harness checks (not models, not simulations)", builtin))
    return groups


class TaskChoiceField(forms.ModelMultipleChoiceField):
    """Tasks listed by their task id."""

    def label_from_instance(self, obj: Task) -> str:
        return obj.task_id


class CampaignLaunchForm(forms.Form):
    name = forms.CharField(max_length=200)
    team = forms.ModelChoiceField(queryset=Team.objects.none())
    agent = forms.ChoiceField(
        help_text="A model endpoint, a simulated persona, or a harness check (do-nothing, skip-last-write, "
        "changed-argument: they test the grader, not a model)."
    )
    suite = forms.ModelChoiceField(queryset=Suite.objects.all())
    domains = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, help_text="None ticked: every domain."
    )
    tasks = TaskChoiceField(
        queryset=Task.objects.none(),
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 8}),
        help_text="None chosen: every gradable (not invalid) task of the ticked domains.",
    )
    exclude_non_discriminating = forms.BooleanField(
        required=False,
        label="Exclude non-discriminating tasks",
        help_text="Tasks a do-nothing attempt passes (suite validation). Left unticked they are run "
        "and flagged; ticked, the campaign leaves them out and its figures say how many.",
    )
    n_attempts = forms.IntegerField(min_value=1, max_value=200, initial=20, label="Attempts per task (N)")
    seed = forms.IntegerField(initial=0)
    window = forms.IntegerField(
        min_value=1,
        required=False,
        label="Window (attempts in flight)",
        help_text="Attempts queued or running at once. Empty: the server's default. Requests to a model "
        "are capped apart, by its agent's max concurrency across all workers.",
    )
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

    user_kind = forms.ChoiceField(
        label="User simulator",
        choices=[("scripted", "Scripted (sends the task's query)"), ("llm", "LLM (plays the customer)")],
        initial="scripted",
    )
    user_model = forms.CharField(max_length=200, required=False, label="User simulator model")
    user_base_url = forms.URLField(
        max_length=500, required=False, assume_scheme="https", label="User simulator endpoint (base URL)"
    )
    user_api_key_env = forms.CharField(
        max_length=100,
        required=False,
        label="User simulator API key variable",
        help_text="Name of the environment variable on the workers (never the key); empty for a local endpoint.",
    )
    user_prompt = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        required=False,
        initial=DEFAULT_INSTRUCTIONS,
        label="User simulator prompt",
        help_text="Must contain {query}, {user_context} and {stop_token}.",
    )
    judge_kind = forms.ChoiceField(
        label="Judge",
        choices=[
            ("keyword", "Keyword (offline; rubrics without keywords stay unjudged)"),
            ("llm", "LLM yes/no"),
        ],
        initial="keyword",
    )
    judge_model = forms.CharField(max_length=200, required=False, label="Judge model")
    judge_base_url = forms.URLField(
        max_length=500, required=False, assume_scheme="https", label="Judge endpoint (base URL)"
    )
    judge_api_key_env = forms.CharField(
        max_length=100,
        required=False,
        label="Judge API key variable",
        help_text="Name of the environment variable on the workers (never the key); empty for a local endpoint.",
    )
    judge_prompt = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        initial=JUDGE_INSTRUCTIONS,
        label="Judge prompt",
        help_text="Runs at temperature 0; the first line of its answer must be yes or no.",
    )

    fault_kinds = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        choices=[(kind, kind.replace("_", " ")) for kind in FAULT_KINDS],
        label="Fault kinds",
        help_text="None ticked: no fault plan. Commit-point kinds hit state-changing calls only, read failure "
        "read-only calls only (docs/faults.md).",
    )
    fault_rate = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        label="Fault rate",
        help_text="Chance each call the plan applies to is faulted (0: the plan is kept, no fault fires).",
    )
    fault_at_calls = forms.CharField(
        required=False,
        max_length=200,
        label="Or at call ordinals",
        help_text="Instead of a rate: 0-based ordinals among the calls the plan applies to, e.g. 0 or 0, 2.",
    )
    fault_tools = forms.ChoiceField(
        choices=[
            ("writes", "State-changing calls"),
            ("reads", "Read-only calls"),
            ("all", "Every call"),
            ("named", "Named tools"),
        ],
        initial="writes",
        required=False,
        label="Faulted tools",
    )
    fault_tool_names = forms.CharField(
        required=False, max_length=1000, label="Tool names", help_text="With named tools: comma-separated."
    )
    fault_seed = forms.IntegerField(
        required=False,
        initial=0,
        label="Fault seed",
        help_text="With the task, attempt and call, decides every fault: the same seed gives the same faults.",
    )

    def __init__(self, *args, teams=None, **kwargs):
        super().__init__(*args, **kwargs)
        # self.fields holds copies of the fields declared above: each keeps its declared class.
        team_field = cast(forms.ModelChoiceField, self.fields["team"])
        suite_field = cast(forms.ModelChoiceField, self.fields["suite"])
        tasks_field = cast(TaskChoiceField, self.fields["tasks"])
        team_field.queryset = teams if teams is not None else Team.objects.none()
        cast(forms.ChoiceField, self.fields["agent"]).choices = agent_choices(team_field.queryset)
        # One team: preselect it, so launching takes one choice fewer.
        if teams is not None and not self.is_bound and len(teams) == 1:
            team_field.initial = teams[0].pk
        # Shared suites and the teams' own (a suite made from imported results is one team's).
        suite_field.queryset = Suite.objects.filter(Q(team__isnull=True) | Q(team__in=team_field.queryset))
        window_field = cast(forms.IntegerField, self.fields["window"])
        window_field.max_value = settings.CAMPAIGN_MAX_WINDOW
        window_field.validators.append(MaxValueValidator(settings.CAMPAIGN_MAX_WINDOW))
        window_field.widget.attrs.update(
            max=settings.CAMPAIGN_MAX_WINDOW, placeholder=settings.CAMPAIGN_DEFAULT_WINDOW
        )
        self.fields["budget_share"].required = False
        self.fields["target_se"].required = False
        suites = suite_field.queryset
        cast(forms.MultipleChoiceField, self.fields["domains"]).choices = [
            (name, name)
            for name in Domain.objects.filter(suite__in=suites)
            .order_by("name")
            .values_list("name", flat=True)
            .distinct()
        ]
        tasks_field.queryset = (
            Task.objects.filter(suite__in=suites).select_related("domain").order_by("task_id")
        )

    def chosen_tasks(self):
        """The suite's tasks the form selects: the chosen tasks, else all of the ticked domains (or all)."""
        data = self.cleaned_data
        tasks = data["suite"].tasks.all()
        if data.get("domains"):
            tasks = tasks.filter(domain__name__in=data["domains"])
        if data.get("tasks"):
            tasks = tasks.filter(pk__in=[task.pk for task in data["tasks"]])
        return tasks

    def clean(self) -> dict[str, Any]:
        super().clean()  # Form.clean returns cleaned_data, which the checks below extend
        data = self.cleaned_data
        suite, tasks = data.get("suite"), data.get("tasks")
        if suite is not None and tasks:
            foreign = sorted(task.task_id for task in tasks if task.suite_id != suite.pk)
            if foreign:
                self.add_error("tasks", f"not in suite {suite.name}: {', '.join(foreign)}")
        configs = {}
        for role in ("user", "judge"):
            if data.get(f"{role}_kind") != "llm":
                configs[role] = {
                    "kind": data.get(f"{role}_kind") or ("scripted" if role == "user" else "keyword")
                }
                continue
            for field in ("model", "base_url"):
                if not data.get(f"{role}_{field}"):
                    self.add_error(
                        f"{role}_{field}",
                        "required for an LLM " + ("user simulator" if role == "user" else "judge"),
                    )
            configs[role] = {
                "kind": "llm",
                "model": data.get(f"{role}_model") or "",
                "base_url": data.get(f"{role}_base_url") or "",
                "api_key_env": data.get(f"{role}_api_key_env") or "",
                "prompt": data.get(f"{role}_prompt") or "",
            }
        data["fault_plan"] = self._fault_plan(data)
        if self.errors:
            return data
        try:
            data["user_simulator"], data["judge"] = evaluator_configs(
                user=configs["user"], judge=configs["judge"]
            )
        except EvaluatorConfigError as exc:
            role = "user" if str(exc).startswith("user simulator") else "judge"
            field = f"{role}_{exc.field}" if f"{role}_{exc.field}" in self.fields else f"{role}_prompt"
            self.add_error(field, str(exc))
        return data

    def _fault_plan(self, data: dict[str, Any]) -> dict | None:
        """The fault plan the fault_* fields describe (None: no kind ticked); errors go to the field at fault."""
        if not data.get("fault_kinds"):
            return None
        try:
            at_calls = [int(part) for part in (data.get("fault_at_calls") or "").replace(",", " ").split()]
        except ValueError:
            self.add_error("fault_at_calls", "whole numbers separated by commas, e.g. 0, 2")
            return None
        names = [name.strip() for name in (data.get("fault_tool_names") or "").split(",") if name.strip()]
        try:
            plan = FaultPlan(
                kinds=tuple(data["fault_kinds"]),
                rate=data.get("fault_rate") or 0.0,
                at_calls=tuple(at_calls),
                tools=data.get("fault_tools") or "writes",
                tool_names=tuple(names),
                seed=data.get("fault_seed") or 0,
            )
        except FaultPlanError as exc:
            # The engine's message starts with the plan's field ("rate: …", "tool_names: …").
            plan_field = str(exc).split(":", 1)[0].split(" and ")[0]
            field = {
                "at_calls": "fault_at_calls",
                "kinds": "fault_kinds",
                "tool_names": "fault_tool_names",
            }.get(plan_field, f"fault_{plan_field}")
            self.add_error(field if field in self.fields else None, str(exc))
            return None
        return plan.to_dict()

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
