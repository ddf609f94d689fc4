"""python manage.py import_thinkingbox --dataset DIR [--test-list FILE] [--suite-name NAME]
[--servers servers.yaml [--python PY] | --mcp-command CMD | --mcp-url URL | --no-launch]"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.thinkingbox.launch import LaunchError, launch_plan, parse_env
from apps.thinkingbox.services import NothingToImport, tb_dataset_import
from tb_engine.thinkingbox import ImportProblem, ThinkingBoxFormatError

MISSING_FILE = "listed test's file is not in the dataset: "


def problem_lines(problems: list[ImportProblem]) -> list[str]:
    """Problems as printed: listed tests of one missing file make one line (with their list lines)."""
    lines: list[str] = []
    missing: dict[tuple[str, str], list[ImportProblem]] = {}
    for problem in problems:
        if problem.message.startswith(MISSING_FILE):
            test_file = problem.message.removeprefix(MISSING_FILE).partition(":")[0]
            key = (problem.file, test_file)
            if key not in missing:
                lines.append("")  # placeholder, filled in below so the order is kept
                missing[key] = []
            missing[key].append(problem)
            continue
        lines.append(str(problem))
    groups = iter(missing.items())
    for position, line in enumerate(lines):
        if line:
            continue
        (list_file, test_file), grouped = next(groups)
        numbers = [p.line for p in grouped if p.line is not None]
        span = f"{min(numbers)}-{max(numbers)}" if len(numbers) > 1 else str(numbers[0]) if numbers else ""
        lines[position] = (
            f"{list_file}:{span}: {test_file} is not in the dataset: "
            f"its {len(grouped)} listed test(s) are not imported"
        )
    return lines


class Command(BaseCommand):
    help = "Import a ThinkingBox-Bench dataset (scenario/ + test_case/) as an evaluation-only suite."

    def add_arguments(self, parser):
        parser.add_argument("--dataset", required=True, help="folder holding scenario/ and test_case/")
        parser.add_argument(
            "--test-list", help="YAML list of 'file.py:test_name' to import (a release's test list)"
        )
        parser.add_argument("--suite-name", help="suite name (default thinkingbox-bench)")
        parser.add_argument(
            "--servers",
            default="",
            metavar="SERVERS_YAML",
            help="ThinkingBox's server config (servers/servers.yaml): how each scenario's server is started",
        )
        parser.add_argument(
            "--python",
            default="",
            help="the servers' interpreter, for {python} in the commands (default: env TB_SERVERS_PYTHON)",
        )
        parser.add_argument(
            "--mcp-command", default="", help="start a scenario's server, e.g. 'python -m pkg.mcp_{server}'"
        )
        parser.add_argument(
            "--mcp-url", default="", help="streamable-HTTP URL of the server ({server} is replaced)"
        )
        parser.add_argument(
            "--mcp-env", action="append", default=[], metavar="KEY=VALUE", help="environment for the server"
        )
        parser.add_argument("--mcp-cwd", default="", help="working folder for the server command")
        parser.add_argument("--mcp-pool-size", type=int, help="warm server processes per worker (default 2)")
        parser.add_argument(
            "--no-launch",
            action="store_true",
            help="import without any launch config: the tasks cannot be run (enough for import_tb_results)",
        )

    def handle(self, *args, **options):
        try:
            launch = launch_plan(
                servers_file=options["servers"],
                python=options["python"],
                command=options["mcp_command"],
                url=options["mcp_url"],
                env=parse_env(options["mcp_env"]),
                cwd=options["mcp_cwd"],
                pool_size=options["mcp_pool_size"],
            )
            if options["no_launch"] and (options["servers"] or options["mcp_command"] or options["mcp_url"]):
                raise LaunchError("--no-launch cannot be combined with --servers, --mcp-command or --mcp-url")
            report = tb_dataset_import(
                directory=options["dataset"],
                test_list=options["test_list"],
                suite_name=options["suite_name"],
                launch=None if options["no_launch"] else launch,
                without_launch=options["no_launch"],
            )
        except (ThinkingBoxFormatError, LaunchError, NothingToImport) as exc:
            raise CommandError(str(exc)) from exc
        suite = report.suite
        self.stdout.write(
            f"Suite {suite.name} {suite.version} (evaluation only): {report.created} new, {report.changed} changed, "
            f"{report.unchanged} unchanged task(s); {len(report.invalid)} invalid (custom check — not supported)."
        )
        if report.skipped:
            per_file = ", ".join(f"{name} {count}" for name, count in sorted(report.skipped.items()))
            self.stdout.write(
                f"Skipped {sum(report.skipped.values())} test(s) not in the test list ({per_file})."
            )
        for line in problem_lines(report.problems):
            self.stdout.write(f"  problem: {line}")
        if report.no_launch:
            left = sum(len(ids) for ids in report.no_launch.values())
            self.stdout.write(
                self.style.WARNING(
                    f"{len(report.no_launch)} scenario(s) without a launch config, not imported "
                    f"({', '.join(sorted(report.no_launch))}; {left} test(s)): see the problems above."
                )
            )
        if report.launch_missing:
            self.stdout.write(
                self.style.WARNING(
                    "Imported with --no-launch: tasks cannot be run until re-imported with --servers, "
                    "--mcp-command or --mcp-url."
                )
            )
