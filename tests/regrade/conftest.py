"""Re-grade fixtures: campaigns run in-process with simulated personas (tests.figures' fixtures)."""

from __future__ import annotations

from tests.campaigns.conftest import drain, make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import _fresh_cache, run_campaign  # noqa: F401 (fixtures)
