from typing import Any

from django import forms
from django.contrib import admin
from django.http import Http404

from apps.agents.models import AgentConfig, PriceSheet
from apps.agents.selectors import agent_editable_by, agents_visible_to
from apps.agents.services import agent_config_problems


class AgentConfigForm(forms.ModelForm):
    """The admin obeys the rules the API does: allowed key variables, parameters the kind can run."""

    base_url = forms.URLField(max_length=500, required=False, assume_scheme="https")

    class Meta:
        model = AgentConfig
        fields = "__all__"

    def clean(self) -> dict[str, Any]:
        super().clean()  # ModelForm.clean returns cleaned_data
        data = self.cleaned_data
        problems = agent_config_problems(
            kind=data.get("kind", ""),
            api_key_env=data.get("api_key_env", ""),
            parameters=data.get("parameters"),
            base_url=data.get("base_url", ""),
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
    list_display = ("name", "kind", "model", "base_url", "api_key_env", "team", "max_concurrency")

    def get_queryset(self, request):
        # Staff who are not administrators see shared agents and their teams' own, as in the API.
        return agents_visible_to(request.user)

    def get_object(self, request, object_id, from_field=None):
        found = super().get_object(request, object_id, from_field)
        if found is None:  # another team's agent answers like a missing one: 404, not a redirect
            raise Http404("no such agent configuration")
        return found

    def has_change_permission(self, request, obj=None):
        allowed = super().has_change_permission(request, obj)
        return allowed and (obj is None or agent_editable_by(obj, request.user))

    def has_delete_permission(self, request, obj=None):
        allowed = super().has_delete_permission(request, obj)
        return allowed and (obj is None or agent_editable_by(obj, request.user))


@admin.register(PriceSheet)
class PriceSheetAdmin(admin.ModelAdmin):
    list_display = ("name", "source", "effective_date")
