"""Process findings on the real ThinkingBox servers (issue 29): the per-call value log.

With per-call attribution the backend reads the server's state after every state-changing call, so
each call's writes come with their old and new values: the write-then-revert persona (its revert
found from the golden replay's own value log, the server's S0 not being the domain's) gets exactly
one ``write_reverted`` finding on the cell it set back, the golden agent none, and neither verdict
moves; an extra row the golden trajectory never writes is ``outside_footprint`` (under on-failure
attribution too: a failing attempt's calls are replayed with a state read after each). Under the
default on-failure attribution a passing attempt has no per-call state, and its analysis says so
(coverage ``net_effects``), never a guessed revert.
"""

from __future__ import annotations

import dataclasses

import pytest

from tb_engine.attempt_setup import AttemptSetup
from tests.engine.thinkingbox.test_regrade_real_servers import _close_pools, _task  # noqa: F401 (fixture)
from tests.support.real_servers import real_domain, servers_python

RETAIL = "sandbox_external_retail"  # golden: create ticket 6, then set its status open -> solved
BOOKING = "external_booking_v1"  # golden: create tickets 13 and ZDSK-00000001, then update 13


def _domain(name: str, attribution: str):
    domain = real_domain(name, servers_python())
    return dataclasses.replace(domain, mcp={**(domain.mcp or {}), "attribute_writes": attribution})


def _run(name: str, agent: str, attribution: str = "per_call", seed: int = 1):
    result = AttemptSetup.from_config(
        _domain(name, attribution), _task(name), agent=agent, seed=seed, judge=None
    ).run()
    assert result.status == "done", result.error
    return result


def _findings(result) -> list[tuple]:
    return [
        (f["kind"], tuple(f["calls"]), f["table"], f["key"], f["field"])
        for f in result.extra["process"]["findings"]
    ]


@pytest.mark.parametrize(
    ("name", "reverted"),
    [
        (RETAIL, ("write_reverted", (2, 1), "zendesk_tickets", "6", "status")),
        (BOOKING, ("write_reverted", (9, 8), "zendesk_tickets", "13", "status")),
    ],
)
def test_write_then_revert_on_a_real_server_is_exactly_one_reverted_write(name, reverted):
    golden = _run(name, "golden")
    persona = _run(name, "sim:write-revert")
    assert (golden.verdict, persona.verdict) == ("pass", "pass")
    assert golden.extra["process"]["coverage"] == persona.extra["process"]["coverage"] == "value_log"
    assert _findings(golden) == []
    assert _findings(persona) == [reverted]
    # The stored value log has the revert's values: set to the golden value, back to S0's, then again.
    status = [row for row in persona.extra["write_log"] if row[3] == "status"]
    assert [(row[0], row[5], row[6]) for row in status] == [
        (reverted[1][1], "open", status[0][6]),
        (reverted[1][0], status[0][6], "open"),
        (reverted[1][0] + 1, "open", status[0][6]),
    ]


@pytest.mark.parametrize("attribution", ["per_call", "on_failure"])
def test_an_extra_row_on_a_real_server_is_outside_the_golden_footprint(attribution):
    # Creates the ticket twice: row 7 is extra. Under on_failure the failing attempt's calls are
    # replayed on a fresh server, which gives the same value log.
    careless = _run(RETAIL, "sim:careless", attribution=attribution, seed=1)
    assert careless.verdict == "fail"
    assert careless.extra["process"]["coverage"] == "value_log"
    assert _findings(careless) == [("outside_footprint", (1,), "zendesk_tickets", "7", None)]


def test_a_passing_attempt_under_on_failure_attribution_has_no_value_log_and_says_so():
    persona = _run(RETAIL, "sim:write-revert", attribution="on_failure")
    assert persona.verdict == "pass"
    assert (persona.extra["process"]["coverage"], _findings(persona)) == ("net_effects", [])
    assert "write_log" not in persona.extra
