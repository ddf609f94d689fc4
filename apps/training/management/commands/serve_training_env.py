"""manage.py serve_training_env --pool FILE [--host --port --ttl --workers N --allow-evaluation-only]"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from apps.suites.models import Suite
from apps.thinkingbox.selectors import stored_suite_spec
from tb_engine.loader import load_builtin_suite
from tb_engine.training.environment import (
    DEFAULT_MAX_EPISODES,
    DEFAULT_TTL_S,
    Environment,
    EvaluationOnlyError,
)
from tb_engine.training.pool import PoolFileError, read_pool
from tb_envserver.workers import MAX_WORKERS, WorkerCountError, serve


def environment_for_pool(
    path: str,
    *,
    allow_evaluation_only: bool,
    ttl_s: float = DEFAULT_TTL_S,
    max_episodes: int = DEFAULT_MAX_EPISODES,
) -> Environment:
    """The Environment serving a pool file's tasks; the stored Suite's evaluation_only flag decides (not the file)."""
    pool = read_pool(path)
    suite_row = Suite.objects.filter(name=pool.suite).first()
    if suite_row is None:
        raise CommandError(f"{path}: suite.name: no suite {pool.suite!r} in the database")
    if (suite_row.evaluation_only or pool.evaluation_only) and not allow_evaluation_only:
        raise CommandError(
            f"suite {suite_row.name} v{suite_row.version} is evaluation-only: its licence forbids training on its tasks. "
            "Pass --allow-evaluation-only to override."
        )
    if suite_row.source == Suite.Source.BUILTIN:
        spec = load_builtin_suite(suite_row.name)
    else:  # an imported ThinkingBox suite: episodes run on its MCP servers, one fresh process each
        spec = stored_suite_spec(suite=suite_row, task_ids=list(pool.task_ids))
    try:
        return Environment(
            spec,
            task_ids=list(pool.task_ids),
            allow_evaluation_only=allow_evaluation_only,
            ttl_s=ttl_s,
            max_episodes=max_episodes,
        )
    except (EvaluationOnlyError, ValueError) as exc:
        raise CommandError(f"{path}: {exc}") from exc


class Command(BaseCommand):
    help = "Serve a training pool's tasks over the OpenEnv-style HTTP API (tb_envserver)."

    def add_arguments(self, parser):
        parser.add_argument("--pool", required=True, help="pool JSON written by select_training_pool")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument("--ttl", type=float, default=DEFAULT_TTL_S, help="seconds an idle episode lives")
        parser.add_argument(
            "--workers", type=int, default=1, help=f"server processes sharing the port (1..{MAX_WORKERS})"
        )
        parser.add_argument("--allow-evaluation-only", action="store_true")

    def handle(self, *args, **options):
        try:
            env = environment_for_pool(
                options["pool"], allow_evaluation_only=options["allow_evaluation_only"], ttl_s=options["ttl"]
            )
        except PoolFileError as exc:
            raise CommandError(str(exc)) from exc

        def announce(url: str) -> None:
            self.stdout.write(f"serving {len(env.pool)} pool task(s) of suite {env.suite.name} on {url}")
            self.stdout.flush()

        # The server never uses the database; forked workers must not share this process's socket to it.
        connections.close_all()
        try:
            serve(env, options["host"], options["port"], workers=options["workers"], announce=announce)
        except WorkerCountError as exc:
            raise CommandError(str(exc)) from exc
