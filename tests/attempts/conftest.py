"""Attempt fixtures: the campaign fixtures (an attempt always belongs to a campaign) and captured messages."""

from tests.campaigns.conftest import careless_in_one_query, make_campaign, sent, starter_suite  # noqa: F401 (fixtures)
