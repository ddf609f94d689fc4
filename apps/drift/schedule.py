"""When a watch runs next: every N minutes, or a five-field crontab read by Celery's parser.

Crontab fields are minute, hour, day of month, month, day of week (0 or 7 = Sunday, names allowed),
matched in the TIME_ZONE of the settings; like Celery's crontab, every field must match.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol, cast
from zoneinfo import ZoneInfo

from celery.schedules import crontab
from django.conf import settings

# A crontab that matches nothing within this many days (e.g. 30 February) is refused.
HORIZON_DAYS = 366 * 4


class ExpandedCrontab(Protocol):
    """The sets of matching values a crontab expands its fields into (celery-types do not declare them)."""

    minute: set[int]
    hour: set[int]
    day_of_week: set[int]
    day_of_month: set[int]
    month_of_year: set[int]


class ScheduleError(ValueError):
    """A schedule that cannot run: neither or both of interval and crontab, or a bad crontab."""


def parse_cron(expression: str) -> crontab:
    """The crontab of a five-field expression; ScheduleError naming the problem."""
    fields = expression.split()
    if len(fields) != 5:
        raise ScheduleError(f"cron: need five fields (minute hour day month weekday), got {expression!r}")
    minute, hour, day_of_month, month_of_year, day_of_week = fields
    try:
        return crontab(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month_of_year,
            day_of_week=day_of_week,
        )
    except (ValueError, KeyError) as exc:
        raise ScheduleError(f"cron: {expression!r}: {exc}") from None


def check_schedule(*, interval_minutes: int | None, cron: str) -> None:
    """ScheduleError unless exactly one of the two is given and it can run."""
    if bool(interval_minutes) == bool(cron.strip()):
        raise ScheduleError(
            "give either interval_minutes (every N minutes) or cron, not both and not neither"
        )
    if cron.strip():
        next_cron_time(parse_cron(cron.strip()), after=datetime.now(ZoneInfo(settings.TIME_ZONE)))


def next_cron_time(schedule: crontab, *, after: datetime) -> datetime:
    """The first whole minute strictly after `after` that the crontab matches (aware, in `after`'s zone)."""
    fields = cast(ExpandedCrontab, schedule)
    zone = ZoneInfo(settings.TIME_ZONE)
    moment = after.astimezone(zone).replace(second=0, microsecond=0) + timedelta(minutes=1)
    limit = moment + timedelta(days=HORIZON_DAYS)
    while moment < limit:
        if moment.month not in fields.month_of_year:
            moment = (moment.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            continue
        # Celery numbers weekdays from Sunday = 0; Python from Monday = 0.
        if moment.day not in fields.day_of_month or (moment.weekday() + 1) % 7 not in fields.day_of_week:
            moment = moment.replace(hour=0, minute=0) + timedelta(days=1)
            continue
        if moment.hour not in fields.hour:
            moment = moment.replace(minute=0) + timedelta(hours=1)
            continue
        if moment.minute not in fields.minute:
            moment += timedelta(minutes=1)
            continue
        return moment
    raise ScheduleError("cron: matches no time in the next four years")


def next_run_after(*, interval_minutes: int | None, cron: str, after: datetime) -> datetime:
    """The watch's next scheduled time after `after` (a finished or started run, or now)."""
    if interval_minutes:
        return after + timedelta(minutes=interval_minutes)
    return next_cron_time(parse_cron(cron.strip()), after=after)
