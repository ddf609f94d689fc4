"""Serve plotly.js from the installed plotly package, so the 4 MB bundle is never committed."""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

PLOTLY_JS_STATIC_PATH = "vendor/plotly/plotly.min.js"
PLOTLY_JS_SOURCE = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


class PlotlyJsFinder(BaseFinder):
    """Finds exactly one file: `vendor/plotly/plotly.min.js` -> plotly's bundled copy."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(PLOTLY_JS_SOURCE.parent))
        # collectstatic joins storage.prefix with listed names to build the target path.
        # django-stubs do not declare `prefix`, which Django's own finders set the same way.
        self.storage.prefix = str(Path(PLOTLY_JS_STATIC_PATH).parent)  # type: ignore[attr-defined]

    def check(self, **kwargs):
        if not PLOTLY_JS_SOURCE.is_file():
            return [Error(f"plotly.js not found at {PLOTLY_JS_SOURCE}", id="core.E001")]
        return []

    def find(self, path, find_all=False, **kwargs):
        find_all = find_all or kwargs.get("all", False)
        if path == PLOTLY_JS_STATIC_PATH and PLOTLY_JS_SOURCE.is_file():
            return [str(PLOTLY_JS_SOURCE)] if find_all else str(PLOTLY_JS_SOURCE)
        return []

    def list(self, ignore_patterns):
        if PLOTLY_JS_SOURCE.is_file():
            yield PLOTLY_JS_SOURCE.name, self.storage
