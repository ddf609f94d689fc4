"""python manage.py run_campaign --suite NAME --agent AGENT --repeat N [--tasks ...] [--exclude-non-discriminating] [--fault-plan JSON] [--wait]

Every task but an invalid one runs, non-discriminating ones included (flagged on the pages) unless
``--exclude-non-discriminating``; the start line says which.

User simulator and judge: ``--user scripted|llm`` with ``--user-model/-base-url/-api-key-env/-prompt-file``,
``--judge keyword|llm`` with ``--judge-model/-base-url/-api-key-env/-prompt-file`` (an LLM judge runs
at temperature 0 and parses its answers strictly; a rubric it cannot answer is unjudged).
"""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.agents.services import UnknownAgent, agent_config_for, price_sheet_default
from apps.attempts.selectors.faults import campaign_fault_figures, fault_figure_rows
from apps.campaigns.selectors import campaign_progress
from apps.campaigns.services import (
    EvaluatorConfigError,
    campaign_create,
    campaign_start,
    campaigns_wait,
    evaluator_configs,
)
from apps.core.services import team_default_for, worker_heartbeat_forget
from apps.suites.models import Suite
from thinkingbox_web.embedded import SupervisedWorker, broker_is_embedded, tasks_run_inline


class Command(BaseCommand):
    help = "Create and start a campaign; with --wait, run it to completion and print its figures."

    def add_arguments(self, parser):
        parser.add_argument("--suite", default="starter")
        parser.add_argument(
            "--agent",
            required=True,
            help="golden | sim:<persona> | check:do-nothing|skip-last-write|changed-argument (harness checks) "
            "| name of an AgentConfig",
        )
        parser.add_argument("--repeat", type=int, default=20, help="attempts per task (N)")
        parser.add_argument(
            "--tasks", nargs="*", help="task ids (default: every gradable task, i.e. every task not invalid)"
        )
        parser.add_argument(
            "--exclude-non-discriminating",
            action="store_true",
            help="leave out tasks a do-nothing attempt passes (default: run them; the campaign records which)",
        )
        parser.add_argument("--name", help="campaign name")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--owner", default=None, help="username (default: the first superuser)")
        parser.add_argument(
            "--wait", action="store_true", help="wait for completion (starts an embedded worker if needed)"
        )
        parser.add_argument("--timeout", type=float, default=3600.0)
        for role, kinds, default in (
            ("user", ("scripted", "llm"), "scripted"),
            ("judge", ("keyword", "llm"), "keyword"),
        ):
            what = "user simulator" if role == "user" else "judge"
            parser.add_argument(
                f"--{role}", choices=kinds, default=default, help=f"the {what} (default {default})"
            )
            parser.add_argument(f"--{role}-model", default="", help=f"LLM {what}: model")
            parser.add_argument(
                f"--{role}-base-url", default="", help=f"LLM {what}: OpenAI-compatible base URL"
            )
            parser.add_argument(
                f"--{role}-api-key-env",
                default="",
                help=f"LLM {what}: NAME of the environment variable holding the key (never the key)",
            )
            parser.add_argument(f"--{role}-prompt-file", default="", help=f"LLM {what}: prompt text file")
        parser.add_argument(
            "--adaptive",
            action="store_true",
            help="adaptive campaign: the suite's latest calibration picks tasks and repeats; figures estimated",
        )
        parser.add_argument("--calibration", type=int, help="calibration id for --adaptive (default: latest)")
        parser.add_argument(
            "--budget-share", type=float, help="--adaptive: attempt budget as a share of N x tasks"
        )
        parser.add_argument("--target-se", type=float, help="--adaptive: stop at this standard error")
        parser.add_argument(
            "--fault-plan",
            default="",
            help='a fault plan as JSON, e.g. \'{"kinds": ["error_after_commit"], "rate": 0.2, "seed": 1}\' '
            "(tb_engine.faults.FaultPlan; docs/faults.md)",
        )

    def handle(self, *args, **options):
        try:
            suite = Suite.objects.get(name=options["suite"])
        except Suite.DoesNotExist:
            raise CommandError(
                f"unknown suite {options['suite']!r}: load it first (python manage.py load_suite)"
            ) from None
        tasks = suite.tasks.all()
        if options["tasks"]:
            tasks = tasks.filter(task_id__in=options["tasks"])
            missing = set(options["tasks"]) - set(tasks.values_list("task_id", flat=True))
            if missing:
                raise CommandError(f"unknown task ids in suite {suite.name}: {', '.join(sorted(missing))}")
        owner = _owner(options["owner"])
        try:
            agent = agent_config_for(options["agent"])
        except UnknownAgent as exc:
            raise CommandError(str(exc)) from None
        try:
            user, judge = evaluator_configs(
                user=_evaluator(options, "user"), judge=_evaluator(options, "judge")
            )
        except EvaluatorConfigError as exc:
            raise CommandError(str(exc)) from None
        adaptive = None
        if options["adaptive"]:
            adaptive = {"calibration": options["calibration"]}
            if options["budget_share"] is not None:
                adaptive["budget_share"] = options["budget_share"]
            if options["target_se"] is not None:
                adaptive["target_se"] = options["target_se"]
        elif options["calibration"] or options["budget_share"] or options["target_se"]:
            raise CommandError("--calibration, --budget-share and --target-se need --adaptive")
        fault_plan = _fault_plan(options["fault_plan"])
        kind = "adaptive, " if adaptive is not None else ""
        try:
            campaign = self._create(
                options, suite, tasks, owner, agent, adaptive, kind, user, judge, fault_plan
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        created = campaign_start(campaign=campaign)
        if adaptive is not None:
            self.stdout.write(
                f"campaign {campaign.pk} started (adaptive): attempts are chosen as results come in; "
                f"estimated figures on /adaptive/campaigns/{campaign.pk}/"
            )
        else:
            self.stdout.write(
                f"campaign {campaign.pk} started: {created} attempts queued ({campaign.non_discriminating_note})"
            )
        self._wait(options, campaign)

    def _create(self, options, suite, tasks, owner, agent, adaptive, kind, user, judge, fault_plan):
        return campaign_create(
            name=options["name"] or f"{agent.name} × {suite.name} ({kind}N={options['repeat']})",
            team=team_default_for(user=owner),
            owner=owner,
            agent=agent,
            suite=suite,
            tasks=list(tasks),
            n_attempts=options["repeat"],
            seed=options["seed"],
            user_simulator=user,
            judge=judge,
            price_sheet=price_sheet_default(),
            adaptive=adaptive,
            exclude_non_discriminating=options["exclude_non_discriminating"],
            fault_plan=fault_plan,
        )

    def _wait(self, options, campaign):
        if not options["wait"]:
            return
        worker = (
            SupervisedWorker(on_exit=worker_heartbeat_forget).start()
            if broker_is_embedded() and not tasks_run_inline()
            else None
        )
        try:
            finished = campaigns_wait([campaign.pk], timeout=options["timeout"])
        finally:
            if worker is not None:
                worker.stop()
        progress = campaign_progress(campaign=campaign)
        rate = f"{100 * progress.pass_rate:.1f}%" if progress.pass_rate is not None else "—"
        self.stdout.write(
            f"campaign {campaign.pk}: {progress.done} done, {progress.passed} passed ({rate}), "
            f"{progress.unjudged} unjudged, {progress.infra_error} infra errors, {progress.cancelled} cancelled"
        )
        if campaign.fault_plan:
            self._print_fault_figures(campaign)
        if not finished:
            raise CommandError(f"campaign {campaign.pk} did not finish within {options['timeout']} s")

    def _print_fault_figures(self, campaign):
        figures = campaign_fault_figures(campaign_id=campaign.pk)
        duplicate = figures["duplicate_effect"]
        self.stdout.write(
            f"under faults: pass@1 {_share(figures['pass_at_1'])}, all-N {_share(figures['all_n'])}, "
            f"duplicate effects {duplicate['count']}/{duplicate['of']}, "
            f"{figures['none_fired']} attempts where no fault fired"
        )
        for row in fault_figure_rows(figures):
            self.stdout.write(
                f"  {row['kind']}: fired in {row['fired']}, recovered {row['recovered']} "
                f"({_share(row['recovery_rate'])}), duplicate effects {row['duplicate_effects']}"
            )


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _fault_plan(text: str) -> dict | None:
    if not text:
        return None
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--fault-plan: not JSON: {exc}") from None
    if not isinstance(plan, dict):
        raise CommandError("--fault-plan: must be a JSON object")
    return plan


def _evaluator(options: dict, role: str) -> dict:
    if options[role] != "llm":
        return {"kind": options[role]}
    prompt = ""
    if options[f"{role}_prompt_file"]:
        try:
            with open(options[f"{role}_prompt_file"], encoding="utf-8") as handle:
                prompt = handle.read()
        except OSError as exc:
            raise CommandError(f"--{role}-prompt-file: {exc}") from None
    for name in ("model", "base_url"):
        if not options[f"{role}_{name}"]:
            raise CommandError(f"--{role} llm needs --{role}-{name.replace('_', '-')}")
    return {
        "kind": "llm",
        "model": options[f"{role}_model"],
        "base_url": options[f"{role}_base_url"],
        "api_key_env": options[f"{role}_api_key_env"],
        "prompt": prompt,
    }


def _owner(username: str | None):
    users = get_user_model().objects
    if username:
        try:
            return users.get(username=username)
        except users.model.DoesNotExist:
            raise CommandError(f"unknown user {username!r}") from None
    owner = users.filter(is_superuser=True).order_by("pk").first()
    if owner is None:
        raise CommandError("no superuser exists: pass --owner or run python manage.py demo first")
    return owner
