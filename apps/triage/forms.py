from __future__ import annotations

from django import forms

from apps.triage.models import Label


class LabelForm(forms.Form):
    name = forms.CharField(max_length=100)
    description = forms.CharField(max_length=300, required=False)
    shortcut = forms.IntegerField(
        min_value=1, max_value=9, required=False, help_text="digit key in the drilldown"
    )
    flags_task_health = forms.BooleanField(required=False, label="puts the task on the health list")

    def __init__(self, *args, instance: Label | None = None, **kwargs):
        if instance is not None and not args:
            kwargs.setdefault(
                "initial",
                {
                    "name": instance.name,
                    "description": instance.description,
                    "shortcut": instance.shortcut,
                    "flags_task_health": instance.flags_task_health,
                },
            )
        super().__init__(*args, **kwargs)

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "description": data["description"],
            "shortcut": data["shortcut"],
            "flags_task_health": data["flags_task_health"],
        }
