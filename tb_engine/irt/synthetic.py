"""A larger synthetic suite for calibration benchmarks, and simulated campaigns on it.

``synthetic_suite(500)`` derives tasks from the built-in starter suite: variant k of a starter
task is that task under a new id (``retail/refund_partial~v03``), so every variant is a real,
runnable task of a real domain, and the simulated skill family (``tb_engine.agents.simulated``)
gives it its own latent difficulty and discrimination (both hashed from the id). Domains get
tasks round-robin, so 500 tasks are 100 per domain.

``simulated_outcomes`` is what a campaign of a simulated persona on such a suite passes, attempt
by attempt, read from each attempt's seeded success draw (``intends_success``) — the statistics
of a campaign without running its sandboxes. It is a simulation, labelled so wherever it is used.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np

from tb_engine.agents.simulated import PERSONAS, intends_success
from tb_engine.loader import load_builtin_suite
from tb_engine.spec import SuiteSpec, TaskSpec


def synthetic_suite(n_tasks: int = 500, *, base: SuiteSpec | None = None) -> SuiteSpec:
    """``n_tasks`` tasks derived from ``base`` (default: the built-in starter suite), variants named ``~vNN``."""
    if base is None:
        base = load_builtin_suite("starter")
    by_domain = {
        domain: sorted((t for t in base.tasks.values() if t.domain == domain), key=lambda t: t.id)
        for domain in sorted(base.domains)
    }
    by_domain = {domain: tasks for domain, tasks in by_domain.items() if tasks}
    order = list(by_domain)
    tasks: dict[str, TaskSpec] = {}
    counters = dict.fromkeys(order, 0)
    i = 0
    while len(tasks) < n_tasks:
        domain = order[i % len(order)]
        i += 1
        templates = by_domain[domain]
        k = counters[domain]
        counters[domain] += 1
        template = templates[k % len(templates)]
        variant = replace(template, id=f"{template.id}~v{k // len(templates):02d}")
        tasks[variant.id] = variant
    return SuiteSpec(
        name=f"synthetic-{n_tasks}",
        version="1",
        domains=dict(base.domains),
        tasks=dict(sorted(tasks.items())),
        description=f"{n_tasks} variants of the {base.name} suite's tasks (synthetic, for calibration benchmarks)",
    )


def attempt_seed(campaign_seed: int, task_id: str, index: int) -> int:
    """Per-attempt seed from (campaign seed, task, index), derived as the campaign worker does."""
    digest = hashlib.sha256(f"{campaign_seed}:{task_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def simulated_outcomes(persona: str, suite: SuiteSpec, *, n_attempts: int = 20, seed: int = 0) -> np.ndarray:
    """(tasks in suite order, n_attempts) booleans: which attempts of a simulated campaign pass."""
    chosen = PERSONAS[persona]
    rows = []
    for task in suite.tasks.values():
        domain = suite.domains[task.domain]
        probability = chosen.task_success_probability(task, domain)
        rows.append(
            [
                intends_success(
                    chosen,
                    task=task,
                    domain=domain,
                    seed=attempt_seed(seed, task.id, index),
                    probability=probability,
                )
                for index in range(n_attempts)
            ]
        )
    return np.asarray(rows, dtype=bool).reshape(len(suite.tasks), n_attempts)
