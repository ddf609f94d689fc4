"""Training fixtures: reuse the figure fixtures (real campaigns, or summaries set directly)."""

from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import _fresh_cache, run_campaign, summaries_campaign  # noqa: F401 (fixtures)
