from __future__ import annotations

from typing import Protocol

from django.contrib import admin
from django.db.models import Count

from apps.core.models import Team, WorkerHeartbeat


class CountedTeam(Protocol):
    """A team row from TeamAdmin.get_queryset, which annotates its member count."""

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
    def member_count(self, team: CountedTeam) -> int:
        return team.member_total


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "last_seen", "first_seen", "beats"]
    search_fields = ["hostname"]
    readonly_fields = ["first_seen"]
