"""Cache headers for vendored bundles whose file name carries their version.

WhiteNoise only marks manifest-hashed names (collectstatic) as immutable; the demo and local runs
serve straight from the finders, so plotly.js would get `max-age=60` and be fetched again every
minute. Its name carries the plotly.js version instead, so a new version is a new URL and the
file can be cached for good everywhere.
"""

from __future__ import annotations

import re
from typing import Any

# `vendor/plotly/plotly-cartesian-4.1.1.min.js`: the version is part of the name.
VERSIONED_VENDOR_FILE = re.compile(r"/vendor/[a-z0-9-]+/[a-z0-9-]+-\d+\.\d+\.\d+\.min\.js$")
ONE_YEAR_SECONDS = 365 * 24 * 60 * 60


def cache_versioned_vendor_files_for_good(headers: Any, path: str, url: str) -> None:
    """WHITENOISE_ADD_HEADERS_FUNCTION: versioned vendor bundles are immutable."""
    if VERSIONED_VENDOR_FILE.search(url):
        headers["Cache-Control"] = f"max-age={ONE_YEAR_SECONDS}, public, immutable"
