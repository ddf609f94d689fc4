"""Figures stored beside the summaries they were computed from: a page reads them, it does not recompute.

One row per *slot* — a figure's kind, its campaign and its parameters (a slice, a second campaign, a
set of campaigns) — holding the value last computed for it and the *version* of the data it was
computed from (a digest of the campaigns' summary stamps, apps.figures.tables). A reader asks for
a slot at the current version: the row answers only when the versions are equal, so a stored figure
can be missing, never stale, and a change to one campaign's attempts changes the version of that
campaign's slots (and of the sets it belongs to) only. Recomputing a slot replaces its row.
"""

from __future__ import annotations

from django.db import models


class StoredFigure(models.Model):
    """One computed figure (pickled typed result or per-task table) and the data version it holds."""

    slot = models.CharField(max_length=120, unique=True)
    # The campaign the slot belongs to (0: a figure over a set of campaigns, e.g. leaderboard bands):
    # what the campaign's deletion removes and what tests read back.
    campaign_id = models.BigIntegerField(db_index=True)
    version = models.CharField(max_length=40)
    # Written and read only by apps.figures.tables (pickle of the app's own frozen dataclasses and
    # DataFrames), like Django's database cache backend stores its values.
    value = models.BinaryField()
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "figures_storedfigure"

    def __str__(self) -> str:
        return f"{self.slot}@{self.version}"


class FigureRefresh(models.Model):
    """A campaign's figures being stored ahead of its first viewer (apps.figures.tasks): the claim.

    A worker takes the row by a conditional update (claimed_at empty, or older than a dead worker's
    claim may be), so two messages for one campaign — a finish and a cancel, a redelivery — never
    compute its figures twice at once; the row is released when the figures are stored.
    """

    campaign_id = models.BigIntegerField(unique=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    refreshed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "figures_figurerefresh"

    def __str__(self) -> str:
        return f"figures of campaign {self.campaign_id}"
