"""Where the shared reference material lives: ``../shared`` beside the checkout (as on CI and every
developer machine), or ``TB_SHARED_DIR`` when it is somewhere else."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = Path(os.environ.get("TB_SHARED_DIR") or REPO_ROOT.parent / "shared")
THINKINGBOX_DIR = SHARED_DIR / "thinkingbox"
