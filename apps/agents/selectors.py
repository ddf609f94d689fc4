"""Reads worth a name for agents: which configurations a user may see, use and edit."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from apps.agents.models import AgentConfig
from apps.core.access import role_rank, teams_for
from apps.core.roles import Role


def agents_visible_to(user) -> QuerySet[AgentConfig]:
    """Agents the user may see and launch with: shared ones (no team) and their teams' own (admins: all)."""
    return AgentConfig.objects.filter(Q(team__isnull=True) | Q(team__in=teams_for(user)))


def agent_editable_by(agent: AgentConfig, user) -> bool:
    """Administrators edit any agent; an operator only their own teams' (never a shared one)."""
    if role_rank(user) >= Role.ADMIN.rank:
        return True
    return agent.team_id is not None and teams_for(user).filter(pk=agent.team_id).exists()
