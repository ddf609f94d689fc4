"""Forms of the agent and price-sheet pages: shape only; the services keep the rules that protect results."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from apps.agents.models import AgentConfig, PriceSheet

PRICE_FIELDS = ("input", "cached_input", "output", "reasoning")


class AgentForm(forms.Form):
    """An OpenAI-compatible agent: where it answers, which model, which key variable (a name, never a key)."""

    name = forms.CharField(max_length=200)
    team: forms.ModelChoiceField = forms.ModelChoiceField(
        queryset=None,
        required=False,
        empty_label=None,
        help_text="The team whose operators edit it and whose members launch with it.",
    )
    model = forms.CharField(max_length=200, help_text="As the endpoint names it, e.g. gpt-4o-mini.")
    base_url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        label="Base URL",
        help_text="The OpenAI-compatible endpoint, ending in /v1.",
    )
    api_key_env = forms.CharField(
        max_length=100,
        required=False,
        widget=forms.TextInput(attrs={"list": "key-names", "autocomplete": "off"}),
        label="Key variable",
        help_text="The name of the environment variable that holds the key on the workers. The key "
        "itself is never typed, stored or shown here.",
    )
    temperature = forms.FloatField(required=False, min_value=0, max_value=2)
    max_tokens = forms.IntegerField(required=False, min_value=1, label="Max output tokens")
    max_concurrency = forms.IntegerField(
        min_value=1, initial=256, help_text="Requests in flight to this endpoint at once, across all workers."
    )
    extra_parameters = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Other parameters (JSON)",
        help_text='Optional, e.g. {"reasoning_effort": "low", "retry": {"max_retries": 2}}.',
    )

    def __init__(self, *args, teams=None, allow_shared: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        team = self.fields["team"]
        assert isinstance(team, forms.ModelChoiceField)
        team.queryset = teams
        if allow_shared:
            team.required = False
            team.empty_label = "shared (every team)"

    @classmethod
    def initial_of(cls, agent: AgentConfig) -> dict[str, Any]:
        parameters = dict(agent.parameters or {})
        known = {key: parameters.pop(key) for key in ("temperature", "max_tokens") if key in parameters}
        return {
            "name": agent.name,
            "team": agent.team_id,
            "model": agent.model,
            "base_url": agent.base_url,
            "api_key_env": agent.api_key_env,
            "max_concurrency": agent.max_concurrency,
            "extra_parameters": json.dumps(parameters, indent=1) if parameters else "",
            **known,
        }

    def clean_api_key_env(self) -> str:
        value = self.cleaned_data["api_key_env"].strip()
        if value.lower().startswith(("sk-", "bearer ")) or len(value) > 60:
            raise forms.ValidationError(
                "This looks like a key. Enter the name of the variable that holds it (e.g. TB_KEY_OPENAI)."
            )
        return value

    def clean_extra_parameters(self) -> dict:
        text = self.cleaned_data["extra_parameters"].strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc.msg} (line {exc.lineno})") from exc
        if not isinstance(value, dict):
            raise forms.ValidationError("must be a JSON object")
        return value

    def parameters(self) -> dict:
        data = self.cleaned_data
        parameters = dict(data.get("extra_parameters") or {})
        for key in ("temperature", "max_tokens"):
            if data.get(key) is not None:
                parameters[key] = data[key]
        return parameters

    def add_problems(self, problems: dict[str, str]) -> None:
        """Attach a service's field -> problem map to the fields it names (else to the form)."""
        for name, problem in problems.items():
            field = name.removeprefix("parameters.")
            if name.startswith("parameters.") and field in ("temperature", "max_tokens"):
                self.add_error(field, problem)
            elif name.startswith("parameters"):
                self.add_error("extra_parameters", f"{field}: {problem}" if field != name else problem)
            elif name in self.fields:
                self.add_error(name, problem)
            else:
                self.add_error(None, f"{name}: {problem}")


class PriceSheetForm(forms.Form):
    """A price sheet: USD per million tokens per model, one model a line."""

    name = forms.CharField(max_length=200)
    source = forms.CharField(max_length=500, help_text="Where the prices come from (a URL or a contract).")
    effective_date = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))
    prices = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="One model a line: model, input, cached input, output, reasoning (USD per million "
        "tokens), e.g. gpt-4o-mini, 0.15, 0.075, 0.60, 0.60",
    )

    @staticmethod
    def prices_text(sheet: PriceSheet) -> str:
        return "\n".join(
            ", ".join([model, *(f"{float(entry.get(name, 0)):g}" for name in PRICE_FIELDS)])
            for model, entry in sorted((sheet.prices or {}).items())
        )

    def clean_prices(self) -> dict[str, dict[str, float]]:
        models: dict[str, dict[str, float]] = {}
        for number, line in enumerate(self.cleaned_data["prices"].splitlines(), start=1):
            if not line.strip():
                continue
            parts = [part.strip() for part in line.split(",")]
            if len(parts) != 1 + len(PRICE_FIELDS):
                raise forms.ValidationError(
                    f"line {number}: expected a model and {len(PRICE_FIELDS)} prices, got {len(parts)} values"
                )
            try:
                values = [float(part) for part in parts[1:]]
            except ValueError as exc:
                raise forms.ValidationError(f"line {number}: prices must be numbers") from exc
            if any(value < 0 for value in values):
                raise forms.ValidationError(f"line {number}: prices cannot be negative")
            models[parts[0]] = dict(zip(PRICE_FIELDS, values))
        if not models:
            raise forms.ValidationError("at least one model")
        return models
