from __future__ import annotations

from django import forms

from apps.agents.models import AgentConfig, PriceSheet
from apps.core.models import Team
from apps.suites.models import Suite


class CampaignLaunchForm(forms.Form):
    name = forms.CharField(max_length=200)
    team = forms.ModelChoiceField(queryset=Team.objects.none())
    agent = forms.ModelChoiceField(queryset=AgentConfig.objects.all())
    suite = forms.ModelChoiceField(queryset=Suite.objects.all())
    domains = forms.CharField(required=False, help_text="Comma-separated domain names (empty: all).")
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
        self.fields["budget_share"].required = False
        self.fields["target_se"].required = False

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
