"""Which version of the grading engine (the harness) ran an attempt.

A campaign stores it (``Campaign.harness_version``) so its figures can be compared only with figures
the same harness produced. It is not the stored result's format: ``results.FORMAT_VERSION`` counts
changes to the JSON's shape, this counts changes to what grading decides.
"""

from __future__ import annotations

from typing import Final

# Bump when the same task and transcript could grade differently (a diff, check, rubric, verdict
# or metric rule changes); a refactor that grades identically keeps it.
ENGINE_VERSION: Final = "1.0"
# The label campaigns store. Its form ("tbw-" + version) is the one stored since the first
# campaign, so old and new values read alike.
HARNESS_VERSION: Final = f"tbw-{ENGINE_VERSION}"
