from django.core.management.base import BaseCommand, CommandError

from tb_engine.cli import run_task_report
from tb_engine.loader import SpecError


class Command(BaseCommand):
    help = "Run one task with an engine agent and print verdicts, categories and the classified diff."

    def add_arguments(self, parser):
        parser.add_argument("task_id")
        parser.add_argument("--agent", default="golden", help="golden | sim:<persona>")
        parser.add_argument("--repeat", type=int, default=1)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--suite", default="starter")

    def handle(self, *args, **options):
        try:
            text = run_task_report(
                options["task_id"],
                agent=options["agent"],
                repeat=options["repeat"],
                seed=options["seed"],
                suite_name=options["suite"],
            )
        except (SpecError, KeyError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(text)
