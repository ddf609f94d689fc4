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

    def __init__(self, *args, teams=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams if teams is not None else Team.objects.none()
