"""Fixtures for engine tests: the real retail domain and its tasks."""

from __future__ import annotations

import pytest

from tb_engine.loader import load_domain, load_tasks
from tests.engine.engine_support import RETAIL_DIR


@pytest.fixture(scope="session")
def retail_domain():
    return load_domain(RETAIL_DIR)


@pytest.fixture(scope="session")
def retail_tasks(retail_domain):
    return load_tasks(RETAIL_DIR, retail_domain)


@pytest.fixture
def retail_task(retail_tasks):
    return lambda local_id: retail_tasks[f"retail/{local_id}"]
