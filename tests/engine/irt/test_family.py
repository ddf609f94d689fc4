"""The simulated skill family and the synthetic suite: labelled simulations, distinct, deterministic."""

from __future__ import annotations

import numpy as np

from tb_engine.agents.simulated import FAMILY, PERSONAS, intends_success, make_simulated_agent, task_latents
from tb_engine.irt.synthetic import simulated_outcomes, synthetic_suite


def test_family_has_sixteen_labelled_simulations_with_distinct_profiles():
    assert len(FAMILY) == 16
    assert set(FAMILY) <= set(PERSONAS)
    profiles = {repr(p.profile) for p in FAMILY.values()}
    assert len(profiles) == 16
    for name, persona in FAMILY.items():
        assert name.startswith("family-")
        assert persona.description.startswith("Simulated persona, not a model (skill family): ")
        assert persona.agent_name == f"sim:{name} (simulated persona, not a model)"


def test_synthetic_suite_has_500_runnable_variants_100_per_domain():
    suite = synthetic_suite(500)
    assert len(suite.tasks) == 500
    per_domain = {d: sum(1 for t in suite.tasks.values() if t.domain == d) for d in suite.domains}
    assert per_domain == dict.fromkeys(sorted(per_domain), 100)
    task = suite.tasks["retail/ticket_hold_carrier_exception~v00"]
    assert task.golden == suite.tasks["retail/ticket_hold_carrier_exception~v01"].golden
    assert task_latents(task.id) != task_latents("retail/ticket_hold_carrier_exception~v01")


def test_intends_success_is_the_agents_own_first_draw():
    suite = synthetic_suite(25)
    for name in ("family-ace", "family-coin-flipper", "steady"):
        for task in list(suite.tasks.values())[:5]:
            domain = suite.domains[task.domain]
            for seed in range(4):
                agent = make_simulated_agent(name, task=task, domain=domain, seed=seed)
                assert (
                    intends_success(PERSONAS[name], task=task, domain=domain, seed=seed)
                    == agent.intends_success
                )


def test_family_profiles_differ_where_they_say():
    suite = synthetic_suite(100)
    rates = {name: simulated_outcomes(name, suite, n_attempts=10).mean() for name in FAMILY}
    assert rates["family-ace"] > rates["family-solid"] > rates["family-average"] > rates["family-novice"]
    retail = np.array([t.domain == "retail" for t in suite.tasks.values()])
    expert = simulated_outcomes("family-retail-expert", suite, n_attempts=10)
    assert expert[retail].mean() > expert[~retail].mean() + 0.2
    # Consistency: the metronome's tasks sit near always or never, the coin flipper's in between.
    metronome = simulated_outcomes("family-metronome", suite, n_attempts=20).mean(axis=1)
    flipper = simulated_outcomes("family-coin-flipper", suite, n_attempts=20).mean(axis=1)
    middle = lambda rates: float(((rates > 0.2) & (rates < 0.8)).mean())  # noqa: E731
    assert middle(metronome) < middle(flipper)
