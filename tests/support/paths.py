"""Where the shared reference material lives.

``TB_SHARED_DIR`` when set; otherwise ``../shared`` beside the checkout (the layout of every
developer machine and of CI), and for checkouts made elsewhere (a scratch clone, a git worktree)
the workplace's own ``/work/shared``.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _shared_dir() -> Path:
    if os.environ.get("TB_SHARED_DIR"):
        return Path(os.environ["TB_SHARED_DIR"])
    beside = REPO_ROOT.parent / "shared"
    return beside if beside.is_dir() else Path("/work/shared")


SHARED_DIR = _shared_dir()
THINKINGBOX_DIR = SHARED_DIR / "thinkingbox"
