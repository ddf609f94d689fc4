"""manage.py thinkingbox_search --suite NAME [--url URL [--key-env VAR] | --off]"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.suites.models import Suite
from apps.thinkingbox.search import SearchServiceError, describe, search_service_clear, search_service_set
from apps.thinkingbox.selectors import search_service_for


class Command(BaseCommand):
    help = (
        "Show or set the search service (Typesense) of an imported ThinkingBox suite. The key is "
        "never stored: name the environment variable that holds it on the workers (--key-env)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--suite", required=True)
        parser.add_argument("--url", help="Typesense URL, e.g. http://127.0.0.1:8108")
        parser.add_argument("--key-env", default="", help="environment variable holding the API key")
        parser.add_argument("--off", action="store_true", help="remove the suite's own setting")

    def handle(self, *args, **options):
        suite = Suite.objects.filter(name=options["suite"]).first()
        if suite is None:
            raise CommandError(f"--suite {options['suite']!r}: no such suite")
        if options["url"] and options["off"]:
            raise CommandError("give --url or --off, not both")
        if options["off"]:
            search_service_clear(suite=suite)
        elif options["url"]:
            try:
                _service, warnings = search_service_set(
                    suite=suite, url=options["url"], api_key_env=options["key_env"]
                )
            except SearchServiceError as exc:
                raise CommandError(str(exc)) from exc
            for warning in warnings:
                self.stderr.write(f"warning: {warning}")
        elif options["key_env"]:
            raise CommandError("--key-env needs --url")
        search = search_service_for(suite_id=suite.pk)
        scope = f" ({search['scope']})" if search else ""
        self.stdout.write(f"suite {suite.name}: search service {describe(search)}{scope}")
