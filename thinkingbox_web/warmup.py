"""Warm a fresh web process before it serves: what its first request would otherwise pay.

A gunicorn worker imports the views and compiles the templates on its first requests; under a burst
(bench/dashboard_concurrency.py's cold burst: 200 requests on fresh processes) that second of
imports and template compilation is paid while a hundred threads wait. docker/gunicorn.conf.py runs
this in `post_worker_init`, before the worker accepts a request. Figures need no warm-up here: they
are stored in PostgreSQL (apps.figures), and a fresh process reads them on its first page.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from django.conf import settings
from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import get_template
from django.urls import get_resolver

logger = logging.getLogger(__name__)


def warm_web_process() -> float:
    """Import every view (the URLconf) and compile every project template; returns the seconds it took."""
    started = time.perf_counter()
    get_resolver().url_patterns  # noqa: B018 — reading it imports every app's views
    folders: list[Path] = [Path(folder) for folder in settings.TEMPLATES[0]["DIRS"]]  # type: ignore[attr-defined]
    for folder in folders:
        root = Path(folder)
        for path in sorted(root.rglob("*.html")):
            try:
                get_template(str(path.relative_to(root)))
            except (TemplateDoesNotExist, TemplateSyntaxError):
                logger.warning("template %s not warmed", path, exc_info=True)
    seconds = time.perf_counter() - started
    logger.info("web process warmed in %.2f s", seconds)
    return seconds
