from django import forms
from django.contrib import admin

from apps.agents.models import AgentConfig, PriceSheet
from apps.agents.services import agent_config_problems


class AgentConfigForm(forms.ModelForm):
    """The admin obeys the rules the API does: allowed key variables, parameters the kind can run."""

    base_url = forms.URLField(max_length=500, required=False, assume_scheme="https")

    class Meta:
        model = AgentConfig
        fields = "__all__"

    def clean(self):
        data = super().clean()
        problems = agent_config_problems(
            kind=data.get("kind", ""),
            api_key_env=data.get("api_key_env", ""),
            parameters=data.get("parameters"),
        )
        checked = set(self.changed_data)
        if "kind" in checked:
            checked.add("parameters")
        for field, problem in problems.items():
            if field.split(".")[0] not in checked:
                continue  # as in agent_config_update: unchanged fields of an existing row are left alone
            self.add_error(field if field in self.fields else "parameters", f"{field}: {problem}")
        return data


@admin.register(AgentConfig)
class AgentConfigAdmin(admin.ModelAdmin):
    form = AgentConfigForm
    list_display = ("name", "kind", "model", "base_url", "api_key_env", "max_concurrency")


@admin.register(PriceSheet)
class PriceSheetAdmin(admin.ModelAdmin):
    list_display = ("name", "source", "effective_date")
