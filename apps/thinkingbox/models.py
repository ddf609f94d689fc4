"""The search service (Typesense) of an imported suite: where its knowledge-base search runs.

Only the URL and the *name* of the environment variable holding the key are stored; the key
itself lives in the workers' environment, is read at run time and is never stored or shown.
"""

from __future__ import annotations

from django.db import models


class SearchService(models.Model):
    suite = models.OneToOneField("suites.Suite", on_delete=models.CASCADE, related_name="search_service")
    url = models.CharField(max_length=300, help_text="e.g. http://127.0.0.1:8108")
    api_key_env = models.CharField(
        max_length=100, blank=True, help_text="Environment variable holding the key (never the key)."
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.suite_id}: {self.url}"
