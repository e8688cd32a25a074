"""sha256 of every results.json, metrics.json and cases.parquet under a folder, one ``digest  relative/path`` a line.

Used to show that a refactor changes no output byte: run the suite serially in a fixed order with a fixed
``--basetemp`` before and after, then ``diff`` the two listings (see CONTRIBUTING.md, "Refactors")."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

NAMES = ("results.json", "metrics.json", "cases.parquet")


def main(root: str) -> int:
    base = Path(root)
    for path in sorted(p for name in NAMES for p in base.rglob(name) if p.is_file() and not p.is_symlink()):
        print(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(base)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
