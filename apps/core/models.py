"""Core tables: teams (campaign visibility) and worker heartbeats (liveness of Celery workers)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class TeamManager(models.Manager["Team"]):
    def get_by_natural_key(self, slug: str) -> Team:
        return self.get(slug=slug)


class Team(models.Model):
    """A group of users; campaigns belong to a team and are visible only to its members."""

    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=120, unique=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = TeamManager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def natural_key(self) -> tuple[str]:
        # Lets fixtures (fixtures/personas.json) name teams by slug and load twice without duplicates.
        return (self.slug,)


# A worker that beat within this many seconds counts as alive (the heartbeat task runs every minute).
WORKER_ALIVE_SECONDS = 180


class WorkerHeartbeat(models.Model):
    """The last time a Celery worker (by hostname) executed the heartbeat task."""

    hostname = models.CharField(max_length=255, unique=True)
    first_seen = models.DateTimeField(default=timezone.now, editable=False)
    last_seen = models.DateTimeField(default=timezone.now)
    beats = models.PositiveIntegerField(default=0)

    # Not stored: the workers page (apps.core.views.workers) sets it for its template, against one `now`.
    is_alive: bool

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.hostname} @ {self.last_seen:%Y-%m-%d %H:%M:%S}"

    @classmethod
    def alive_count(cls, now=None) -> int:
        """How many workers beat within WORKER_ALIVE_SECONDS (one query)."""
        since = (now or timezone.now()) - timedelta(seconds=WORKER_ALIVE_SECONDS)
        return cls.objects.filter(last_seen__gte=since).count()

    def age_seconds(self, now=None) -> float:
        """Seconds since this worker last beat."""
        return ((now or timezone.now()) - self.last_seen).total_seconds()
