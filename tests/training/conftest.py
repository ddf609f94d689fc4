"""Training fixtures: reuse the dashboard's campaign helpers (real campaigns, or summaries set directly)."""

from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.dashboard.conftest import _fresh_cache, run_campaign, summaries_campaign  # noqa: F401 (fixtures)
