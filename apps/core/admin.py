from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from django.contrib import admin
from django.db.models import Count

from apps.core.models import Team, WorkerHeartbeat

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class MemberTotal(TypedDict):
    member_total: int


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "member_count", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    filter_horizontal = ["members"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_total=Count("members"))

    @admin.display(description="members", ordering="member_total")
    def member_count(self, team: WithAnnotations[Team, MemberTotal]) -> int:
        return team.member_total


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "last_seen", "first_seen", "beats"]
    search_fields = ["hostname"]
    readonly_fields = ["first_seen"]
