"""Writes for ThinkingBox-Bench: import a dataset as a suite, import ``tb infer`` rows as a campaign.

Both imports write in one transaction and the engine raises ThinkingBoxFormatError naming file,
line and test, so a failing import leaves the database unchanged. A dataset is parsed whole first;
a results file is streamed (keys first, then each row parsed as it is stored).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils.text import slugify

from apps.agents.services import agent_config_imported
from apps.attempts.services import ImportRow
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import campaign_name_taken
from apps.campaigns.services import campaign_import
from apps.core.models import Team
from apps.suites.models import Suite, Task
from apps.suites.services import suite_store
from apps.thinkingbox.launch import LaunchPlan
from apps.thinkingbox.results_rows import converted_rows
from tb_engine.spec import DomainSpec, SuiteSpec, TaskSpec
from tb_engine.thinkingbox import (
    ImportProblem,
    ThinkingBoxFormatError,
    iter_tb_row_keys,
    parse_tb_row,
    read_dataset,
)
from tb_engine.thinkingbox.agg import OurFigures, TbAggFigures, TbTally, our_figures, tb_agg_figures
from tb_engine.thinkingbox.results import TbRecord

CUSTOM_CHECK_DETAIL = "custom check — not supported"
IMPORTED_AGENT_MARKER = (
    "thinkingbox"  # AgentConfig.parameters["imported"]: rows came from tb infer, not our runner
)


@dataclass
class DatasetImport:
    suite: Suite
    created: int  # tasks new to the suite
    changed: int  # tasks whose content hash changed
    unchanged: int
    invalid: list[str]  # task ids imported as invalid (custom test bodies)
    problems: list[ImportProblem] = field(default_factory=list)
    launch_missing: bool = False  # imported with --no-launch: the tasks cannot be run
    skipped: dict[str, int] = field(default_factory=dict)  # test file -> tests not in the test list
    no_launch: dict[str, list[str]] = field(default_factory=dict)  # scenario -> its tests left out


class NothingToImport(ValueError):
    """No task of the dataset can be imported (the message says why); nothing was written."""


def _with_launch(
    spec: SuiteSpec, plan: LaunchPlan | None, problems: list[ImportProblem]
) -> tuple[SuiteSpec, dict[str, list[str]]]:
    """Each domain with its launch config; a domain without one is left out with its tasks.

    Returns the spec and, per left-out scenario, its task ids; each left-out scenario is one
    problem naming it and its server.
    """
    domains: dict[str, DomainSpec] = {}
    left_out: dict[str, list[str]] = {}
    for name, domain in spec.domains.items():
        server = (domain.mcp or {}).get("server") or name
        launch = plan.for_server(server) if plan is not None else None
        if launch is not None:
            domains[name] = dataclasses.replace(domain, mcp={**(domain.mcp or {}), "launch": launch})
            continue
        left_out[name] = [task_id for task_id, task in spec.tasks.items() if task.domain == name]
        where = (
            f"{plan.source} has no entry for it"
            if plan is not None
            else "give --servers servers.yaml, --mcp-command or --mcp-url"
        )
        problems.append(
            ImportProblem(
                domain.source,
                f"scenario {name}: no launch config for its server {server!r} ({where}); "
                f"its {len(left_out[name])} test(s) are not imported",
            )
        )
    tasks = {task_id: task for task_id, task in spec.tasks.items() if task.domain in domains}
    return dataclasses.replace(spec, domains=domains, tasks=tasks), left_out


def tb_dataset_import(
    *,
    directory: str | Path,
    test_list: str | Path | None = None,
    suite_name: str | None = None,
    launch: LaunchPlan | None = None,
    without_launch: bool = False,
) -> DatasetImport:
    """Import a ThinkingBox dataset folder as an evaluation-only suite (source thinkingbox).

    Every imported domain gets its server's launch config from ``launch``; a scenario without
    one is a problem and neither it nor its tests are written. ``without_launch`` stores every
    scenario with no launch config instead (tasks that cannot run, e.g. only to hang
    ``tb infer`` results on).

    Side effects: upserts Suite, Domain and Task rows in one transaction; re-imports update rows
    in place and each task row carries its new content hash (attempts keep the hash they ran).
    Custom test bodies are stored with validation 'invalid'. Raises ThinkingBoxFormatError, and
    NothingToImport when no task is left to import (nothing is written then).
    """
    read = read_dataset(directory, test_list)
    spec, problems = read.suite, list(read.problems)
    if suite_name:
        spec = dataclasses.replace(spec, name=suite_name)
    no_launch: dict[str, list[str]] = {}
    if not without_launch:
        spec, no_launch = _with_launch(spec, launch, problems)
    if not spec.tasks:
        reasons = [str(p) for p in problems if p.message.startswith("scenario ")] or [
            f"{len(problems)} problem(s), e.g. {problems[0]}" if problems else "the dataset holds no test"
        ]
        raise NothingToImport("nothing to import: " + "; ".join(reasons))
    validations = {}
    invalid = []
    for task_id, task in spec.tasks.items():
        if any(check.kind == "custom_unsupported" for check in task.checks):
            validations[task_id] = (Task.Validation.INVALID, CUSTOM_CHECK_DETAIL)
            invalid.append(task_id)
    before = dict(Task.objects.filter(suite__name=spec.name).values_list("task_id", "content_hash"))
    suite = suite_store(spec=spec, source=Suite.Source.THINKINGBOX, validations=validations)
    hashes = {task_id: task.content_hash() for task_id, task in spec.tasks.items()}
    return DatasetImport(
        suite=suite,
        created=sum(1 for t in hashes if t not in before),
        changed=sum(1 for t, h in hashes.items() if t in before and before[t] != h),
        unchanged=sum(1 for t, h in hashes.items() if before.get(t) == h),
        invalid=invalid,
        problems=problems,
        launch_missing=without_launch,
        skipped=read.skipped,
        no_launch=no_launch,
    )


@dataclass
class ResultsImport:
    campaign: Campaign
    attempts: int
    suite_created: bool
    tb_agg: TbAggFigures
    ours: OurFigures
    disagreements: int  # attempts whose our-state verdict differs from ThinkingBox's hash verdict


def _matching_suite(task_ids: set[str], suite_name: str | None, path: Path, team: Team) -> Suite | None:
    usable = Suite.objects.filter(Q(team__isnull=True) | Q(team=team))  # never another team's own suite
    if suite_name:
        suite = usable.filter(name=suite_name).first()
        if suite is None:
            raise ThinkingBoxFormatError(
                f"suite {suite_name!r} does not exist; import the dataset first", file=path
            )
        missing = sorted(task_ids - set(suite.tasks.values_list("task_id", flat=True)))
        if missing:
            raise ThinkingBoxFormatError(
                f"tests not in suite {suite_name!r}: {', '.join(missing)}", file=path
            )
        return suite
    for suite in usable.filter(source=Suite.Source.THINKINGBOX).order_by("-updated_at"):
        if task_ids <= set(suite.tasks.values_list("task_id", flat=True)):
            return suite
    return None


def _first_user_message(record: TbRecord) -> str:
    return next((m.content for m in record.transcript.messages if m.role == "user"), "")


def _minimal_suite(records: list[TbRecord], name: str, path: Path, team: Team) -> Suite:
    """A suite made from the rows alone: one domain per test file, tasks without golden data.

    It belongs to the importing team: its tasks hold the rows' first user messages.

    Such tasks cannot be re-run or re-graded by us (no golden trajectory, no init); they exist so
    imported verdicts have a task to hang on. Their detail says so.
    """
    domains: dict[str, DomainSpec] = {}
    tasks: dict[str, TaskSpec] = {}
    for record in records:
        scenario = record.task_id.split(":", 1)[0].removesuffix(".py")
        domains.setdefault(
            scenario,
            DomainSpec(
                name=scenario,
                title=scenario.replace("_", " "),
                policy="",
                tables={},
                tools={},
                base_data={},
                backend="mcp",
                mcp={"server": scenario},
                source=str(path),
            ),
        )
        tasks.setdefault(
            record.task_id,
            TaskSpec(
                id=record.task_id,
                domain=scenario,
                query=_first_user_message(record),
                user_context="",
                data_patch={},
                golden=(),
                tags=("thinkingbox", "imported-results"),
                title=record.task_id.split(":", 1)[1],
                source=f"{path}:{record.line}",
                extra={"created_from_results": str(path)},
            ),
        )
    spec = SuiteSpec(
        name=name,
        version="results",
        domains=domains,
        tasks=tasks,
        evaluation_only=True,
        description=f"Minimal suite created from tb infer rows in {path}",
    )
    detail = "created from tb infer rows: no golden trajectory or init, verdicts are ThinkingBox's own"
    return suite_store(
        spec=spec,
        source=Suite.Source.THINKINGBOX,
        validations=dict.fromkeys(tasks, (Task.Validation.UNKNOWN, detail)),
        team=team,
    )


def _slug(text: str) -> str:
    return slugify(text)[:80] or "imported"


class _TestRows:
    """What the first pass keeps of one test: its row count, last repetition and which repetitions it saw."""

    __slots__ = ("last_repetition", "repetitions", "runs")

    def __init__(self) -> None:
        self.runs, self.last_repetition = 0, -1
        # Bit r set once repetition r was seen (r < MAX_REPETITIONS = 200): a few dozen bytes per
        # test where a {repetition: line} map cost about 100 bytes a row.
        self.repetitions = 0


@dataclass
class _Survey:
    """A first pass over a results file: every row's key checked, only what the import needs kept."""

    tests: dict[str, _TestRows] = field(default_factory=dict)  # in order of first appearance
    first: dict[str, TbRecord] = field(default_factory=dict)  # each test's first row (minimal suite)
    agents: set[str] = field(default_factory=set)
    rows: int = 0

    @property
    def n_attempts(self) -> int:
        """The campaign's N: the highest repetition + 1, or the most rows of one test if more."""
        tests = self.tests.values()
        return max(max(t.last_repetition + 1 for t in tests), max(t.runs for t in tests))


def _earlier_line(path: Path, task_id: str, repetition: int) -> int:
    """The first line holding (test, repetition): read again only once a duplicate was found."""
    return next(k.line for k in iter_tb_row_keys(path) if (k.task_id, k.repetition) == (task_id, repetition))


def _survey(path: Path) -> _Survey:
    """Read the file once, a key at a time: bad JSON, a bad key or a duplicate (test, repetition) raises, naming its line.

    The rest of each row is checked by the second pass (``_stored_attempts``), inside the import's
    transaction, so a bad row there still leaves nothing written; only each test's first row is
    parsed here, for a minimal suite.
    """
    survey = _Survey()
    for key in iter_tb_row_keys(path):
        test = survey.tests.get(key.task_id)
        if test is None:
            test = survey.tests[key.task_id] = _TestRows()
            survey.first[key.task_id] = parse_tb_row(key.row, file=str(path), line=key.line)
        bit = 1 << key.repetition
        if test.repetitions & bit:
            raise ThinkingBoxFormatError(
                f"duplicate attempt: {key.task_id} repetition {key.repetition} "
                f"(also on line {_earlier_line(path, key.task_id, key.repetition)})",
                file=path,
                line=key.line,
            )
        test.repetitions |= bit
        test.runs += 1
        test.last_repetition = max(test.last_repetition, key.repetition)
        survey.agents.add(key.agent)
        survey.rows += 1
    return survey


@dataclass
class _Stored:
    """What the second pass counts while it stores the rows: tb agg's tallies and verdict disagreements."""

    tally: TbTally = field(default_factory=TbTally)
    disagreements: int = 0


def _stored_rows(
    path: Path, task_rows: dict[str, Task], counted: _Stored, *, rows: int
) -> Iterator[ImportRow]:
    """The second pass: each row parsed whole (in parallel for a big file), counted, ready to store."""
    tasks = {task_id: (task.pk, task.content_hash) for task_id, task in task_rows.items()}
    for row, tallied, disagreements in converted_rows(path, tasks, rows=rows):
        counted.tally.add(tallied)
        counted.disagreements += disagreements
        yield row


@transaction.atomic
def tb_results_import(
    *, path: str | Path, campaign_name: str, team: Team, owner=None, suite_name: str | None = None
) -> ResultsImport:
    """Turn ``tb infer`` output (JSONL or one YAML result) into a finished campaign.

    The file is read twice, a row at a time, so memory stays flat however many rows it holds:
    once for the rows' keys (tests, repetitions, duplicates), once to parse each row whole and
    store them in batches; a bad row found then rolls the whole import back. Side effects, in one transaction: maybe a minimal Suite (when no imported suite
    holds the test ids), an AgentConfig named ``tb:<metadata.agent>`` (kind openai, marked
    imported, not a simulation), a Campaign (status done), one Attempt per row and refreshed
    TaskSummary rows. Raises ThinkingBoxFormatError (file, line) for bad rows, a duplicate (test,
    repetition), an unknown suite or an existing campaign name.
    """
    path = Path(path)
    survey = _survey(path)
    if not survey.rows:
        raise ThinkingBoxFormatError("no rows to import", file=path)
    if campaign_name_taken(team=team, name=campaign_name):
        raise ThinkingBoxFormatError(
            f"campaign {campaign_name!r} already exists in team {team.slug}", file=path
        )
    agents = sorted(survey.agents)
    owner = (
        owner
        or team.members.order_by("id").first()
        or get_user_model().objects.filter(is_superuser=True).first()
    )
    if owner is None:
        raise ThinkingBoxFormatError(f"team {team.slug} has no member to own the campaign", file=path)

    task_ids = set(survey.first)
    suite = _matching_suite(task_ids, suite_name, path, team)
    suite_created = suite is None
    if suite is None:
        suite = _minimal_suite(
            list(survey.first.values()), f"tb-results-{team.slug}-{_slug(campaign_name)}"[:100], path, team
        )
    task_rows = {t.task_id: t for t in Task.objects.filter(suite=suite, task_id__in=task_ids)}

    agent = agent_config_imported(
        name=f"tb:{'+'.join(agents)}",
        model="+".join(agents),
        parameters={"imported": IMPORTED_AGENT_MARKER, "tb_agents": agents},
    )
    counted = _Stored()
    campaign = campaign_import(
        name=campaign_name,
        team=team,
        owner=owner,
        agent=agent,
        suite=suite,
        rows=_stored_rows(path, task_rows, counted, rows=survey.rows),
        tasks=[task_rows[task_id] for task_id in survey.first],
        n_attempts=survey.n_attempts,
        source=str(path),
        harness="tb infer",
    )
    return ResultsImport(
        campaign=campaign,
        attempts=survey.rows,
        suite_created=suite_created,
        tb_agg=tb_agg_figures(counted.tally),
        ours=our_figures(counted.tally),
        disagreements=counted.disagreements,
    )


def figures_side_by_side(tb: TbAggFigures, ours: OurFigures) -> list[tuple[str, str, str, str]]:
    """Rows (figure, tb agg, ours, why they differ) for what both compute, plus our extras.

    Our pass@k / pass^k rows are always there, each with the tasks it averages over; where tb agg
    leaves a figure out (run counts differ) its column says so.
    """

    def pct(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    differ = not tb.equal_runs
    tb_at, tb_plugin = dict(tb.pass_at_k), dict(tb.pass_power_k_plugin)
    left_out = "not printed by tb agg: run counts differ" if differ else "not printed by tb agg"
    runs_note = (
        f"counts differ ({ours.runs_min}–{ours.runs_max} per test): tb agg prints the first test's "
        "count and leaves pass@k / pass^k out"
        if differ
        else ""
    )
    rows = [
        ("tests", str(tb.num_tests), str(ours.tasks), ""),
        (
            "runs per test",
            str(tb.runs_per_test),
            f"{ours.runs_min}–{ours.runs_max} (differ)" if differ else str(ours.runs_max),
            runs_note,
        ),
        (
            "runs",
            str(tb.total_runs),
            f"{ours.attempts_done} done + {ours.infra_errors} infra errors",
            "tb agg counts error rows as failures; we exclude them and report coverage",
        ),
        (
            "mean pass / pass@1",
            pct(tb.mean_pass),
            pct(ours.pass_at_1),
            "same when no row is an error" if ours.infra_errors == 0 else "differs: error rows",
        ),
    ]
    ours_power = dict(ours.pass_power_k)
    k_tasks = dict(ours.k_tasks)

    def over(k: int) -> str:
        return f"ours over {k_tasks[k]} of {ours.tasks} task(s) with ≥ {k} done attempts"

    for k, value in ours.pass_at_k:
        theirs = tb_at.get(k)
        rows.append(
            (f"pass@{k}", pct(theirs), pct(value), over(k) + ("" if theirs is not None else f"; {left_out}"))
        )
    for k, value in ours.pass_power_k_plugin:
        theirs = tb_plugin.get(k)
        note = "tb agg's Pass^k; " + over(k) + ("" if theirs is not None else f"; {left_out}")
        rows.append((f"pass^{k} plug-in (c/n)^k", pct(theirs), pct(value), note))
        rows.append(
            (
                f"pass^{k} unbiased C(c,k)/C(n,k)",
                "—",
                pct(ours_power[k]),
                "SPEC §5; " + over(k) + "; not printed by tb agg",
            )
        )
    rows += [
        ("observed all-N", "—", f"{ours.all_n_count} ({ours.all_n_share:.2f})", f"N = {ours.repeats}"),
        ("pass@N observed", "—", pct(ours.pass_at_n_observed), ""),
        ("discovery-reliability gap", "—", f"{ours.gap_points:.1f} pp", ""),
        ("coverage", "—", pct(ours.coverage), f"{ours.incomplete_tasks} incomplete task(s)"),
    ]
    return rows
