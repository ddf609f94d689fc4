"""Worker fixtures: the campaigns' (built-in suite, make_campaign) — workers run their attempts."""

from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
