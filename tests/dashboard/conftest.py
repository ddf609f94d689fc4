"""Dashboard fixtures: the figure fixtures (campaigns run in-process or with counts set directly)."""

from tests.api.conftest import api_for  # noqa: F401 (fixtures)
from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import _fresh_cache, run_campaign, summaries_campaign  # noqa: F401 (fixtures)
