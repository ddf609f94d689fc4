"""Smoke fixtures: the campaigns' and figures' fixtures, so demo-like data can be built here."""

from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import _fresh_cache, run_campaign  # noqa: F401 (fixtures)
