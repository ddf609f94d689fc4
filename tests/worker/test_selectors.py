"""The worker's per-process view of stored domains: an imported domain is re-read every few seconds."""

from __future__ import annotations

from apps.worker import selectors


def test_an_imported_domain_is_read_again_only_once_it_is_no_longer_fresh(monkeypatch):
    reads = []

    def read(*, suite_id, spec):
        reads.append((suite_id, spec["name"]))
        return f"domain {spec['name']} #{len(reads)}"

    monkeypatch.setattr(selectors, "runnable_mcp_domain", read)
    monkeypatch.setattr(selectors, "tasks_run_inline", lambda: False)
    monkeypatch.setattr(selectors, "_mcp_domains", {})

    shop = {"name": "shop", "mcp": {"launch": {"command": "python"}}}
    first = [selectors._runnable_mcp_domain(3, shop) for _ in range(3)]
    other = selectors._runnable_mcp_domain(3, {**shop, "mcp": {"launch": {"command": "python3"}}})
    monkeypatch.setattr(selectors, "MCP_DOMAIN_FRESH_S", 0.0)
    again = selectors._runnable_mcp_domain(3, shop)

    assert first == ["domain shop #1"] * 3
    assert (other, again) == ("domain shop #2", "domain shop #3")
    assert reads == [(3, "shop")] * 3


def test_inline_runs_always_read_the_stored_rows(monkeypatch):
    reads = []
    monkeypatch.setattr(selectors, "runnable_mcp_domain", lambda *, suite_id, spec: reads.append(suite_id))
    monkeypatch.setattr(selectors, "tasks_run_inline", lambda: True)

    selectors._runnable_mcp_domain(3, {"name": "shop"})
    selectors._runnable_mcp_domain(3, {"name": "shop"})

    assert reads == [3, 3]
