"""Where flashbed keeps things outside the repository."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Per-user cache (built kernels): $FLASHBED_CACHE, else $XDG_CACHE_HOME/flashbed."""
    env = os.environ.get("FLASHBED_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flashbed"


def repo_root() -> Path:
    """The source tree this package runs from (an editable install)."""
    return Path(__file__).resolve().parents[2]
