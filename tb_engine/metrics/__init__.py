"""Metrics of SPEC §5-§6 as pure functions over a per-task (n, c) table. See docs/metrics.md."""

from tb_engine.metrics.bootstrap import bootstrap_means, resample_counts
from tb_engine.metrics.campaign import (
    MetricsInputError,
    campaign_metrics,
    costs,
    coverage,
    coverage_bounds,
    slice_metrics,
    validate_per_task,
)
from tb_engine.metrics.compare import learning_zone, paired_comparison, reversals, spearman
from tb_engine.metrics.estimators import pass_at_k, pass_hat_k, pass_hat_k_plugin, success_rate
from tb_engine.metrics.noise import (
    MDD_FACTOR,
    NOISE_METRICS,
    noise_report,
    pairwise_floors,
    replicate_spread,
    rerun_floor,
    standard_errors,
    tied_bands,
)
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
    "MDD_FACTOR",
    "NOISE_METRICS",
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
    "coverage_bounds",
    "in_learning_zone",
    "learning_zone",
    "noise_report",
    "pairwise_floors",
    "paired_comparison",
    "pass_at_k",
    "pass_hat_k",
    "pass_hat_k_plugin",
    "posterior_params",
    "prob_a_beats_b",
    "prob_between",
    "replicate_spread",
    "rerun_floor",
    "resample_counts",
    "reversals",
    "slice_metrics",
    "spearman",
    "standard_errors",
    "success_rate",
    "tied_bands",
    "validate_per_task",
]
