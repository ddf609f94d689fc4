"""``python -m tb_envserver --suite starter --port 8765 [--pool FILE] [--workers N] [--allow-evaluation-only]``.

ThinkingBox-format tasks on the real ThinkingBox MCP servers instead of a suite:
``--thinkingbox-dataset DIR --servers servers.yaml --python SERVERS_PYTHON [--test-cases DIR …]
[--benchmark-list testlist.yaml]`` (the benchmark's tasks are left out: evaluation only)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tb_engine.loader import SUITES_DIR, SpecError, load_builtin_suite, load_suite
from tb_engine.spec import SuiteSpec
from tb_engine.training.environment import (
    DEFAULT_MAX_EPISODES,
    DEFAULT_TTL_S,
    Environment,
    EvaluationOnlyError,
)
from tb_engine.training.pool import PoolFileError, read_pool
from tb_envserver.workers import MAX_WORKERS, WorkerCountError, serve


def load_named_suite(name_or_path: str) -> SuiteSpec:
    """A built-in suite by name, else a suite directory."""
    if (SUITES_DIR / name_or_path).is_dir():
        return load_builtin_suite(name_or_path)
    return load_suite(Path(name_or_path))


def thinkingbox_suite(args: argparse.Namespace) -> SuiteSpec:
    """The training suite of ThinkingBox-format tasks outside the benchmark, on the real servers."""
    from tb_engine.training.thinkingbox_suite import read_training_suite  # noqa: PLC0415 — loads pandas/scipy

    python = args.python or os.environ.get("TB_SERVERS_PYTHON", "")
    if not args.servers or not python:
        raise ValueError("--thinkingbox-dataset needs --servers and --python (or TB_SERVERS_PYTHON)")
    read = read_training_suite(
        args.thinkingbox_dataset,
        servers=args.servers,
        python=python,
        test_cases=args.test_cases,
        benchmark_list=args.benchmark_list,
    )
    for note in read.unsupported:
        print(f"left out: {note}", file=sys.stderr)
    if read.ungraded:
        print(f"note: {len(read.ungraded)} task(s) have no automatic grade (reward null)", file=sys.stderr)
    return read.suite


def build_environment(args: argparse.Namespace) -> Environment:
    """The Environment the arguments describe (pool file restricts the tasks; evaluation-only is refused)."""
    suite = thinkingbox_suite(args) if args.thinkingbox_dataset else load_named_suite(args.suite)
    task_ids = None
    if args.pool:
        pool = read_pool(args.pool)
        if pool.suite != suite.name:
            raise PoolFileError(
                f"{pool.path}: suite.name: pool is for suite {pool.suite!r}, server loaded {suite.name!r}"
            )
        if pool.evaluation_only and not args.allow_evaluation_only:
            raise EvaluationOnlyError(
                f"{pool.path}: suite {pool.suite} is evaluation-only (its licence forbids training on it); "
                "pass --allow-evaluation-only to override"
            )
        task_ids = list(pool.task_ids)
    return Environment(
        suite,
        task_ids=task_ids,
        allow_evaluation_only=args.allow_evaluation_only,
        ttl_s=args.ttl,
        max_episodes=args.max_episodes,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tb_envserver", description=__doc__)
    p.add_argument(
        "--suite", default="starter", help="built-in suite name or suite directory (default: starter)"
    )
    p.add_argument("--thinkingbox-dataset", help="ThinkingBox dataset folder (scenario/, test_case/)")
    p.add_argument("--servers", help="ThinkingBox servers.yaml (server name -> launch command)")
    p.add_argument("--python", help="the servers' interpreter (default: env TB_SERVERS_PYTHON)")
    p.add_argument(
        "--test-cases", action="append", help="test-case folder(s) (default: DATASET/test_case); repeatable"
    )
    p.add_argument("--benchmark-list", help="the benchmark's test list: its tasks are left out")
    p.add_argument("--pool", help="training pool JSON (manage.py select_training_pool); default: every task")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--ttl", type=float, default=DEFAULT_TTL_S, help="seconds an idle episode lives")
    p.add_argument("--max-episodes", type=int, default=DEFAULT_MAX_EPISODES)
    p.add_argument(
        "--allow-evaluation-only", action="store_true", help="serve an evaluation-only suite anyway"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help=f"server processes sharing the port (1..{MAX_WORKERS}); any of them can drive any episode",
    )
    p.add_argument("--verbose", action="store_true", help="log every request")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        env = build_environment(args)
    except (EvaluationOnlyError, PoolFileError, SpecError, ValueError) as exc:  # ThinkingBoxFormatError too
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def announce(url: str) -> None:  # the first line, printed once the port accepts connections
        print(f"serving {len(env.pool)} task(s) of suite {env.suite.name} on {url}", flush=True)

    try:
        return serve(env, args.host, args.port, workers=args.workers, verbose=args.verbose, announce=announce)
    except WorkerCountError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
