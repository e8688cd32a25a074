"""Per-case result cache: a re-run after a crash, or after adding cases, computes only what is missing.

An entry is keyed by the sha256 of everything that determines the case's numbers: the content digests of its
input files, the benchmark's metric configuration and the trackeval version. Entries are small JSON files
(never pickles: a cache folder may be shared), written atomically, so a process killed mid-write leaves no
half entry; a corrupt or unreadable entry is treated as a miss and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trackeval import __version__
from trackeval.io.atomic import atomic_path

log = logging.getLogger(__name__)


def cache_key(*parts: str) -> str:
    """sha256 over the parts (input digests, config digest) and the trackeval version."""
    h = hashlib.sha256(__version__.encode())
    for part in parts:
        h.update(b"\0" + part.encode())
    return h.hexdigest()


@dataclass(frozen=True)
class CaseCache:
    """A folder of ``<namespace>/<key[:2]>/<key>.json`` entries; ``root=None`` disables caching."""

    root: Path | None
    namespace: str

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / self.namespace / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached payload, or None on a miss (including a corrupt entry)."""
        if self.root is None:
            return None
        try:
            payload = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return payload if isinstance(payload, dict) else None

    def put(self, key: str, payload: dict[str, Any]) -> None:
        """Store ``payload`` (JSON-serialisable); a failure to write only costs a recomputation later."""
        if self.root is None:
            return
        try:
            with atomic_path(self._path(key)) as tmp:
                tmp.write_text(json.dumps(payload, sort_keys=True, allow_nan=False), encoding="utf-8")
        except OSError as exc:
            log.warning("case cache entry not written (%s): %s", self.root, exc)
