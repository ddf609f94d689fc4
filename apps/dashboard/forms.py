"""Small forms: external benchmark scores and the what-if price editor (which never writes)."""

from __future__ import annotations

from django import forms


class _CampaignChoiceForm(forms.Form):
    campaign = forms.ModelChoiceField(queryset=None)

    def __init__(self, *args, campaigns, **kwargs):
        super().__init__(*args, **kwargs)
        from apps.campaigns.models import Campaign

        # Only campaigns the user may see are valid choices (a forged id fails validation).
        self.fields["campaign"].queryset = Campaign.objects.filter(pk__in=[c.pk for c in campaigns])
        self.fields["campaign"].choices = [("", "—")] + [(c.pk, c.name) for c in campaigns]


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
