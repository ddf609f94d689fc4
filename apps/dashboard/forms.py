"""Small forms: external benchmark scores and the what-if price editor (which never writes)."""

from __future__ import annotations

from typing import cast

from django import forms

from apps.campaigns.models import Campaign


class _CampaignChoiceForm(forms.Form):
    campaign: forms.ModelChoiceField[Campaign] = forms.ModelChoiceField(queryset=None)

    def __init__(self, *args, campaigns, **kwargs):
        super().__init__(*args, **kwargs)
        # Only campaigns the user may see are valid choices (a forged id fails validation).
        # self.fields holds a copy of the field declared above: it keeps its declared class.
        field = cast(forms.ModelChoiceField, self.fields["campaign"])
        field.queryset = Campaign.objects.filter(pk__in=[c.pk for c in campaigns])
        field.choices = [("", "—")] + [(c.pk, c.name) for c in campaigns]


class ExternalScoreForm(_CampaignChoiceForm):
    benchmark = forms.CharField(max_length=100)
    score = forms.FloatField()


class WhatIfPriceForm(_CampaignChoiceForm):
    """USD per million tokens; cached input and reasoning are priced separately (SPEC §5)."""

    input = forms.DecimalField(min_value=0, max_digits=12, decimal_places=6, label="input $/M")
    cached_input = forms.DecimalField(min_value=0, max_digits=12, decimal_places=6, label="cached input $/M")
    output = forms.DecimalField(min_value=0, max_digits=12, decimal_places=6, label="output $/M")
    reasoning = forms.DecimalField(min_value=0, max_digits=12, decimal_places=6, label="reasoning $/M")

    def prices(self) -> dict[str, float]:
        return {
            key: float(self.cleaned_data[key]) for key in ("input", "cached_input", "output", "reasoning")
        }


class PlannerForm(forms.Form):
    """The attempts planner's question: detect a target difference in pass@1, read variances from campaigns."""

    MODE_CHOICES = (
        ("drift", "Drift check: the same configuration re-run (detects a uniform shift)"),
        ("ab", "A/B: two different configurations (needs two campaigns on the same tasks)"),
    )
    campaigns: forms.ModelMultipleChoiceField[Campaign] = forms.ModelMultipleChoiceField(
        queryset=None, help_text="The first is the pilot: its design and prices. More add variance estimates."
    )
    mode = forms.ChoiceField(choices=MODE_CHOICES, initial="drift")
    target_pp = forms.FloatField(
        min_value=0.1, max_value=100, initial=5, label="difference to detect (pp)", help_text="in pass@1"
    )

    def __init__(self, *args, campaigns, **kwargs):
        super().__init__(*args, **kwargs)
        field = cast(forms.ModelMultipleChoiceField, self.fields["campaigns"])
        field.queryset = Campaign.objects.filter(pk__in=[c.pk for c in campaigns])
        field.choices = [(c.pk, c.name) for c in campaigns]

    def chosen_ids(self, data_order: list[str]) -> list[int]:
        """The chosen campaigns' ids in the order they were given (the first is the pilot)."""
        picked = {c.pk for c in self.cleaned_data["campaigns"]}
        return list(dict.fromkeys(int(v) for v in data_order if v.isdigit() and int(v) in picked))
