"""`python3 -m flashbed.yaffs2`: build the YAFFS2 daemon into the cache (setup runs
this), or reuse the cached one; prints its path."""

from __future__ import annotations

import sys

from ..errors import FlashbedError
from .build import ensure_daemon


def main() -> int:
    try:
        print(ensure_daemon())
    except FlashbedError as e:
        print(f"flashbed: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
