"""Lineage of a tracked evaluation: git commit, DVC data digest, flattened config params, idempotency key."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from trackeval.config.loader import load_yaml
from trackeval.errors import ConfigError, InputError
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
    ``path:md5`` of every dependency and output recorded in ``dvc.lock``; None without either file (or when
    neither records an md5).

    Both files are read with the strict YAML loader (:func:`~trackeval.config.loader.load_yaml`): a key repeated
    in one mapping (a hand-edited or badly merged file, where PyYAML would silently keep the last value and the
    digest would rest on half the record) is refused like any unreadable file.

    Raises:
        InputError: either file cannot be read or is not what DVC writes (naming ``data.dvc`` when it exists,
            else ``dvc.lock``).
    """
    dvc_file, lock = root / "data.dvc", root / "dvc.lock"
    try:
        if dvc_file.is_file() and (digest := _dvc_file_digest(dvc_file)) is not None:
            return digest
        if lock.is_file():
            return _dvc_lock_digest(lock)
    except (OSError, yaml.YAMLError, ConfigError, AttributeError, KeyError, TypeError) as exc:
        raise InputError(
            f"cannot read the DVC digest: {exc}", file=str(dvc_file if dvc_file.exists() else lock)
        ) from exc
    return None


def _dvc_file_digest(path: Path) -> str | None:
    """The ``md5`` of the one output recorded in the ``.dvc`` file ``path``, a sha256 over the sorted ``md5`` of
    several, None when no output has one. Raises what reading or walking the file raises."""
    outs = (_read_dvc_yaml(path) or {}).get("outs", [])
    md5s = [o["md5"] for o in outs if isinstance(o, dict) and "md5" in o]
    if len(md5s) == 1:
        return str(md5s[0])
    if md5s:
        return hashlib.sha256("\n".join(sorted(md5s)).encode()).hexdigest()
    return None


def _dvc_lock_digest(path: Path) -> str | None:
    """A sha256 over the sorted ``path:md5`` of every dependency and output of every stage of the ``dvc.lock``
    file ``path`` that records an ``md5``; None when none does. Raises what reading or walking the file raises."""
    stages = (_read_dvc_yaml(path) or {}).get("stages", {})
    entries = sorted(
        f"{e['path']}:{e['md5']}"
        for stage in stages.values()
        for e in (stage.get("deps", []) + stage.get("outs", []))
        if "md5" in e
    )
    return hashlib.sha256("\n".join(entries).encode()).hexdigest() if entries else None


def _read_dvc_yaml(path: Path) -> Any:
    """The data of the DVC YAML file ``path`` (strictly loaded: a repeated key is a :class:`ConfigError`)."""
    return load_yaml(path.read_text(encoding="utf-8"), where=f"DVC file {path.name}")


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
