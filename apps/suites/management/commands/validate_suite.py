from django.core.management.base import BaseCommand, CommandError

from tb_engine.cli import validate_suite_report
from tb_engine.loader import SpecError


class Command(BaseCommand):
    help = "Validate a built-in suite: prints 'N tasks: V valid, I invalid, D non-discriminating'; fails on any invalid."

    def add_arguments(self, parser):
        parser.add_argument("--suite", default="starter")

    def handle(self, *args, **options):
        try:
            text, exit_code = validate_suite_report(options["suite"])
        except SpecError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(text)
        if exit_code:
            raise CommandError("the suite has invalid tasks")
