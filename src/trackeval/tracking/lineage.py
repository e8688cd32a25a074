"""Lineage of a tracked evaluation: git commit, DVC data digest, flattened config params, idempotency key."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from trackeval.errors import InputError
from trackeval.results import BenchmarkResult


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config -> ``{"a.b.c": "value"}`` with JSON-encoded leaves (lists, None) for MLflow params."""
    out: dict[str, str] = {}
    for key, value in sorted(tree.items()):
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return out


def git_commit(cwd: Path) -> str:
    """``git rev-parse HEAD`` of the working directory's repository, or ``unknown``."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def dvc_data_digest(root: Path) -> str | None:
    """The DVC digest of the benchmark data: the ``md5`` of ``data.dvc``'s output(s), else a sha256 over the
    ``path:md5`` of every dependency and output recorded in ``dvc.lock``; None without either file."""
    dvc_file, lock = root / "data.dvc", root / "dvc.lock"
    try:
        if dvc_file.is_file():
            outs = (yaml.safe_load(dvc_file.read_text(encoding="utf-8")) or {}).get("outs", [])
            md5s = [o["md5"] for o in outs if isinstance(o, dict) and "md5" in o]
            if len(md5s) == 1:
                return str(md5s[0])
            if md5s:
                return hashlib.sha256("\n".join(sorted(md5s)).encode()).hexdigest()
        if lock.is_file():
            stages = (yaml.safe_load(lock.read_text(encoding="utf-8")) or {}).get("stages", {})
            entries = sorted(
                f"{e['path']}:{e['md5']}"
                for stage in stages.values()
                for e in (stage.get("deps", []) + stage.get("outs", []))
                if "md5" in e
            )
            return hashlib.sha256("\n".join(entries).encode()).hexdigest() if entries else None
    except (OSError, yaml.YAMLError, AttributeError, KeyError, TypeError) as exc:
        raise InputError(
            f"cannot read the DVC digest: {exc}", file=str(dvc_file if dvc_file.exists() else lock)
        ) from exc
    return None


def idempotency_key(result: BenchmarkResult) -> str:
    """Identity of a tracked evaluation: benchmark, data digest, model name and version, config digest."""
    parts = [
        result.benchmark,
        result.data.digest,
        result.model.get("name", ""),
        result.model.get("version", ""),
        result.config_digest,
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
