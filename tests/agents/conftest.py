"""Agent fixtures: the campaigns' (built-in suite, make_campaign) — for agents that campaigns use."""

from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
