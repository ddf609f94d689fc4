"""Figures over imported attempts: exactly what ``tb agg`` prints, and ours (SPEC §5).

The two differ on purpose. ``tb agg`` counts error rows as failures, reports pass^k as the
plug-in (c/n)^k and drops pass@k/pass^k when attempt counts differ (printing the first test's
count as "Runs per test"). Ours exclude infrastructure errors (shown as coverage instead), use
the unbiased C(c,k)/C(n,k) for pass^k, show the plug-in only under its own label, and are
always given: each k averages over the tasks with at least k done attempts (SPEC §5), and says
how many those are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from math import comb, inf
from typing import NamedTuple

from tb_engine.metrics.posterior import beta_interval_mass, beta_quantile
from tb_engine.thinkingbox.results import TbRecord, TbRowStats

TB_AGG_K = (1, 5, 10, 20, 50, 100)  # the k values tb agg reports, those <= runs per test
JEFFREYS = 0.5  # tb agg's Beta(0.5, 0.5) prior for its credible interval and Goldilocks zone
ZONE_LOW, ZONE_HIGH, ZONE_LEVEL = 1 / 16, 15 / 16, 0.95


@dataclass(frozen=True)
class Spread:
    mean: float
    low: float
    high: float


@dataclass(frozen=True)
class TbAggTestRow:
    """One row of tb agg's per-test table."""

    task_id: str
    runs: int
    passes: int
    fails: int
    errors: int
    assistant_texts: Spread
    user_texts: Spread
    tool_responses: Spread  # Avg-TC: tool responses per attempt
    output_tokens: Spread
    reasoning_tokens: Spread
    char_length: Spread
    execution_time: Spread
    success_pct: float
    p_zone: float  # P(1/16 < p < 15/16 | data) under Beta(0.5, 0.5)

    @property
    def in_zone(self) -> bool:
        return self.p_zone >= ZONE_LEVEL


@dataclass(frozen=True)
class TbAggFigures:
    num_tests: int
    runs_per_test: int  # what tb agg prints: the first test's count, even when counts differ
    equal_runs: bool  # every test has the same count (else tb agg leaves pass@k / pass^k out)
    total_runs: int
    mean_pass: float
    mean_pass_ci: tuple[float, float]
    pass_at_k: tuple[tuple[int, float], ...]
    pass_power_k_plugin: tuple[tuple[int, float], ...]  # tb agg's "Pass^k": (c/n)^k
    per_test: tuple[TbAggTestRow, ...] = field(default=())


def _spread(values: list[float]) -> Spread:
    return Spread(sum(values) / len(values), min(values), max(values)) if values else Spread(0.0, 0.0, 0.0)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_power_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k (all k of k draws without replacement pass): C(c, k) / C(n, k)."""
    return comb(c, k) / comb(n, k)


STATS = (
    "assistant_texts",
    "user_texts",
    "tool_responses",
    "output_tokens",
    "reasoning_tokens",
    "char_length",
    "execution_time",
)


class _Running:
    """A Spread kept as rows arrive: the same sum (in row order), min and max as over the full list."""

    __slots__ = ("count", "high", "low", "total")

    def __init__(self) -> None:
        self.total, self.low, self.high, self.count = 0.0, inf, -inf, 0

    def add(self, value: float) -> None:
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)
        self.count += 1

    def spread(self) -> Spread:
        if not self.count:
            return Spread(0.0, 0.0, 0.0)
        return Spread(self.total / self.count, self.low, self.high)


class _TaskTally:
    __slots__ = ("done", "errors", "infra_errors", "last_repetition", "passes", "runs", "stats")

    def __init__(self) -> None:
        self.runs = self.passes = self.errors = self.done = self.infra_errors = 0
        self.last_repetition = -1
        self.stats = {name: _Running() for name in STATS}


class TbTallied(NamedTuple):
    """What TbTally reads of a row: small enough to send from the process that parsed the row."""

    task_id: str
    passed: bool
    tb_error_row: bool
    status: str
    repetition: int
    stats: TbRowStats

    @classmethod
    def of(cls, record: TbRecord) -> TbTallied:
        return cls(
            record.task_id, record.passed, record.tb_error_row, record.status, record.repetition, record.stats
        )


class TbTally:
    """What tb agg's figures and ours need of each row, kept per test as rows arrive.

    An import of a million rows adds them one at a time instead of holding them all.
    """

    def __init__(self) -> None:
        self.tasks: dict[str, _TaskTally] = {}  # in order of first appearance, as tb agg lists them

    @classmethod
    def of(cls, records: Iterable[TbRecord]) -> TbTally:
        tally = cls()
        for record in records:
            tally.add(record)
        return tally

    def add(self, record: TbRecord | TbTallied) -> None:
        task = self.tasks.get(record.task_id)
        if task is None:
            task = self.tasks[record.task_id] = _TaskTally()
        task.runs += 1
        task.passes += record.passed
        task.errors += record.tb_error_row
        task.done += record.status == "done"
        task.infra_errors += record.status == "infra_error"
        task.last_repetition = max(task.last_repetition, record.repetition)
        for name in STATS:
            task.stats[name].add(getattr(record.stats, name))


def _tally(records: Iterable[TbRecord] | TbTally) -> TbTally:
    return records if isinstance(records, TbTally) else TbTally.of(records)


def tb_agg_figures(records: Iterable[TbRecord] | TbTally) -> TbAggFigures:
    """The figures ``tb agg`` prints: every row counts, error rows as failures."""
    rows = []
    for task_id, task in _tally(records).tasks.items():
        passes, runs = task.passes, task.runs
        spreads = {name: task.stats[name].spread() for name in STATS}
        rows.append(
            TbAggTestRow(
                task_id=task_id,
                runs=runs,
                passes=passes,
                fails=runs - passes - task.errors,
                errors=task.errors,
                **spreads,
                success_pct=100.0 * passes / runs,
                p_zone=beta_interval_mass(ZONE_LOW, ZONE_HIGH, JEFFREYS + passes, JEFFREYS + runs - passes),
            )
        )
    total = sum(r.runs for r in rows)
    passed = sum(r.passes for r in rows)
    equal_runs = len({r.runs for r in rows}) == 1
    runs_per_test = rows[0].runs if rows else 0
    ks = [k for k in TB_AGG_K if equal_runs and k <= runs_per_test]
    a, b = JEFFREYS + passed, JEFFREYS + total - passed
    return TbAggFigures(
        num_tests=len(rows),
        runs_per_test=runs_per_test,
        equal_runs=equal_runs,
        total_runs=total,
        mean_pass=passed / total if total else 0.0,
        mean_pass_ci=(beta_quantile(0.025, a, b), beta_quantile(0.975, a, b)) if total else (0.0, 0.0),
        pass_at_k=tuple((k, sum(pass_at_k(r.runs, r.passes, k) for r in rows) / len(rows)) for k in ks),
        pass_power_k_plugin=tuple((k, sum((r.passes / r.runs) ** k for r in rows) / len(rows)) for k in ks),
        per_test=tuple(rows),
    )


def format_tb_agg_summary(figures: TbAggFigures) -> str:
    """The aggregate block ``tb agg`` prints under its table, line for line."""
    lines = [
        f"Number of tests: {figures.num_tests}",
        f"Runs per test: {figures.runs_per_test}",
        f"Total runs: {figures.total_runs}",
        f"Mean per-sample accuracy: {figures.mean_pass:.2f} "
        f"(95% CI: {figures.mean_pass_ci[0]:.2f}-{figures.mean_pass_ci[1]:.2f})",
    ]
    if figures.pass_at_k:
        lines.append("Pass@k:")
        lines.extend(f"  pass@{k}: {value:.2f}" for k, value in figures.pass_at_k)
        lines.append("Pass^k:")
        lines.extend(f"  pass^{k}: {value:.2f}" for k, value in figures.pass_power_k_plugin)
    return "\n".join(lines)


@dataclass(frozen=True)
class OurFigures:
    """SPEC §5 figures over imported attempts: infra errors excluded and reported as coverage.

    pass@k, pass^k and the plug-in for each k average over the same tasks, those with at least
    k done attempts; ``k_tasks`` says how many of ``tasks`` that is.
    """

    tasks: int
    attempts_expected: int  # tasks x N
    attempts_done: int
    infra_errors: int
    coverage: float  # attempts_done / attempts_expected
    incomplete_tasks: int  # n_t < N
    repeats: int  # N, the largest attempt count of any task
    runs_min: int  # fewest rows (attempts of any status) of one task
    runs_max: int
    pass_at_1: float
    pass_at_k: tuple[tuple[int, float], ...]
    pass_power_k: tuple[tuple[int, float], ...]  # unbiased C(c,k)/C(n,k)
    pass_power_k_plugin: tuple[tuple[int, float], ...]  # labelled: tb agg's (c/n)^k
    k_tasks: tuple[tuple[int, int], ...]  # k -> tasks with n_t >= k (those the three figures average)
    all_n_count: int
    all_n_share: float
    pass_at_n_observed: float
    gap_points: float  # discovery-reliability gap in percentage points


def our_figures(records: Iterable[TbRecord] | TbTally, ks: tuple[int, ...] = TB_AGG_K) -> OurFigures:
    """SPEC §5 figures (pass@1, pass@k, pass^k, all-N, gap, coverage) over imported attempts."""
    grouped = _tally(records).tasks
    repeats = max((t.last_repetition + 1 for t in grouped.values()), default=0)
    repeats = max(repeats, max((t.runs for t in grouped.values()), default=0))
    counts = [(t.done, t.passes) for t in grouped.values()]
    measured = [(n, c) for n, c in counts if n > 0]
    largest = max((n for n, _ in measured), default=0)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    eligible = {k: [(n, c) for n, c in measured if n >= k] for k in ks if k <= largest}
    all_n = sum(1 for n, c in counts if n == c == repeats and repeats > 0)
    any_pass = sum(1 for _, c in counts if c >= 1)
    tasks = len(counts)
    done_total = sum(n for n, _ in counts)
    all_n_share = all_n / tasks if tasks else 0.0
    observed = any_pass / tasks if tasks else 0.0
    rows = [t.runs for t in grouped.values()]
    return OurFigures(
        tasks=tasks,
        attempts_expected=tasks * repeats,
        attempts_done=done_total,
        infra_errors=sum(t.infra_errors for t in grouped.values()),
        coverage=done_total / (tasks * repeats) if tasks and repeats else 0.0,
        incomplete_tasks=sum(1 for n, _ in counts if n < repeats),
        repeats=repeats,
        runs_min=min(rows, default=0),
        runs_max=max(rows, default=0),
        pass_at_1=mean([c / n for n, c in measured]),
        pass_at_k=tuple((k, mean([pass_at_k(n, c, k) for n, c in e])) for k, e in eligible.items()),
        pass_power_k=tuple((k, mean([pass_power_k(n, c, k) for n, c in e])) for k, e in eligible.items()),
        pass_power_k_plugin=tuple((k, mean([(c / n) ** k for n, c in e])) for k, e in eligible.items()),
        k_tasks=tuple((k, len(e)) for k, e in eligible.items()),
        all_n_count=all_n,
        all_n_share=all_n_share,
        pass_at_n_observed=observed,
        gap_points=100.0 * (observed - all_n_share),
    )
