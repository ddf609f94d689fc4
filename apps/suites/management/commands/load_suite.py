from django.core.management.base import BaseCommand, CommandError

from apps.suites.services import suite_load_builtin
from tb_engine.loader import SpecError


class Command(BaseCommand):
    help = "Load (or update) a built-in suite into the database, validating every task."

    def add_arguments(self, parser):
        parser.add_argument("--suite", default="starter")
        parser.add_argument("--no-validate", action="store_true")

    def handle(self, *args, **options):
        try:
            suite = suite_load_builtin(name=options["suite"], validate=not options["no_validate"])
        except SpecError as exc:
            raise CommandError(str(exc)) from exc
        counts: dict[str, int] = {}
        for status in suite.tasks.values_list("validation", flat=True):
            counts[status] = counts.get(status, 0) + 1
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        self.stdout.write(f"suite {suite.name} v{suite.version}: {suite.tasks.count()} tasks ({summary})")
