"""Metrics of SPEC §5-§6 as pure functions over a per-task (n, c) table. See docs/metrics.md."""

from tb_engine.metrics.bootstrap import bootstrap_means, resample_counts
from tb_engine.metrics.campaign import (
    MetricsInputError,
    campaign_metrics,
    costs,
    coverage,
    slice_metrics,
    validate_per_task,
)
from tb_engine.metrics.compare import learning_zone, paired_comparison, reversals, spearman
from tb_engine.metrics.estimators import pass_at_k, pass_hat_k, pass_hat_k_plugin, success_rate
from tb_engine.metrics.posterior import (
    LEARNING_ZONE_HI,
    LEARNING_ZONE_LO,
    LEARNING_ZONE_Q,
    beta_cdf,
    beta_interval_mass,
    beta_quantile,
    in_learning_zone,
    posterior_params,
    prob_a_beats_b,
    prob_between,
)

__all__ = [
    "LEARNING_ZONE_HI",
    "LEARNING_ZONE_LO",
    "LEARNING_ZONE_Q",
    "MetricsInputError",
    "beta_cdf",
    "beta_interval_mass",
    "beta_quantile",
    "bootstrap_means",
    "campaign_metrics",
    "costs",
    "coverage",
    "in_learning_zone",
    "learning_zone",
    "paired_comparison",
    "pass_at_k",
    "pass_hat_k",
    "pass_hat_k_plugin",
    "posterior_params",
    "prob_a_beats_b",
    "prob_between",
    "resample_counts",
    "reversals",
    "slice_metrics",
    "spearman",
    "success_rate",
    "validate_per_task",
]
