"""The real ThinkingBox servers for tests: their interpreter, launch configs and domains.

The servers' venv is named by ``TB_SERVERS_PYTHON`` (a python with the shared
``tb_business_ops_servers_202606`` package installed *editable from a temporary copy*: a regular
install leaves its JSON seed data behind); without it, the venv tests.support.servers_venv
builds (or has cached). When neither works the tests that need the servers skip with the
reason, except on CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pytest

from tb_engine.spec import DomainSpec
from tb_engine.thinkingbox.dataset import parse_scenario
from tb_engine.thinkingbox.mcp_config import McpServerConfig
from tests.support.paths import REPO_ROOT, THINKINGBOX_DIR

PACKAGE = "tb_business_ops_servers_202606"
DOMAINS = (
    "sandbox_external_retail",
    "external_booking_v1",
    "sandbox_auto_insurance",
    "sandbox_consulting",
    "sandbox_neobank_support_v1",
)
SHARED_DOMAINS = DOMAINS[:2]  # test files shared in ../shared/thinkingbox/dataset
OWN_DOMAINS = DOMAINS[2:]  # test files kept back: ours are in fixtures/thinkingbox/test_case
DATASET = THINKINGBOX_DIR / "dataset"
OWN_TEST_CASES = REPO_ROOT / "fixtures" / "thinkingbox" / "test_case"
SERVER_ENV = {"TYPESENSE_API_KEY": "Fake"}  # as servers.yaml sets it


@lru_cache(maxsize=1)
def _usable(python: str) -> str:
    """'' when ``python`` imports the servers with their seed data, else the reason it does not."""
    probe = (
        "import importlib.util, pathlib; "
        f"spec = importlib.util.find_spec('{PACKAGE}'); "
        "root = pathlib.Path(list(spec.submodule_search_locations)[0]); "
        "print(len(list(root.rglob('initial_data/*.json'))))"
    )
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        return f"TB_SERVERS_PYTHON={python} cannot run: {exc}"
    if done.returncode != 0:
        return f"TB_SERVERS_PYTHON={python} cannot import {PACKAGE}: {done.stderr.strip()[-300:]}"
    if int(done.stdout.strip() or 0) == 0:
        return f"{PACKAGE} under {python} has no seed data (install it editable from a temporary copy)"
    return ""


def servers_python() -> str:
    """The servers' interpreter (tests.support.servers_venv: TB_SERVERS_PYTHON, else the cached venv),
    checked for the seed data; skip (fail on CI) with the reason."""
    from tests.support.servers_venv import ServersUnavailable, on_ci
    from tests.support.servers_venv import servers_python as find_servers_python

    try:
        python = str(find_servers_python())
        reason = _usable(python)
    except ServersUnavailable as exc:
        reason = str(exc)
    if reason:
        if on_ci():
            pytest.fail(f"the real ThinkingBox servers are required on CI: {reason}")
        pytest.skip(reason)
    return python


def server_module(domain: str) -> str:
    return f"{PACKAGE}.mcp_{domain}"


def server_config(domain: str, python: str) -> McpServerConfig:
    return McpServerConfig(command=python, args=("-m", server_module(domain)), env=dict(SERVER_ENV))


def launch(domain: str, python: str) -> dict:
    """The MCP launch config a suite stores for ``domain`` (``Domain.spec["mcp"]["launch"]``)."""
    return {"command": python, "args": ["-m", server_module(domain)], "env": dict(SERVER_ENV)}


def real_domain(domain: str, python: str) -> DomainSpec:
    """The scenario as a DomainSpec served by the real server; without a search service, so no sources."""
    spec = parse_scenario(DATASET / "scenario" / f"{domain}.yaml")
    mcp = dict(spec.mcp or {})
    mcp["world_state"] = {k: v for k, v in mcp["world_state"].items() if k != "sources"}
    mcp["launch"] = launch(domain, python)
    return replace(spec, mcp=mcp)


def task_files(domain: str) -> list[Path]:
    """The ThinkingBox test-case files of ``domain``: shared ones, or ours for the held-back domains."""
    folder = (DATASET / "test_case" if domain in SHARED_DOMAINS else OWN_TEST_CASES) / domain
    return sorted(folder.glob("*.py"))
