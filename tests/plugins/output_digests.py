"""A pytest plug-in that records the digest of every results set the test suite produces.

Used to show that a change is behaviour-preserving (a refactor must leave every unit's results.json,
metrics.json and cases.parquet byte-identical on every fixture the suite builds)::

    TRACKEVAL_OUTPUT_DIGESTS=/tmp/before .venv/bin/python -m pytest -p tests.plugins.output_digests -p no:randomly
    # ... the change ...
    TRACKEVAL_OUTPUT_DIGESTS=/tmp/after .venv/bin/python -m pytest -p tests.plugins.output_digests -p no:randomly
    .venv/bin/python -m tests.plugins.output_digests /tmp/before /tmp/after

Every call of ``trackeval.io.results_folder.output_bytes`` (the one producer of the three files' bytes) is
recorded as ``{test node id: [[unit, file, sha256], ...]}`` in call order, one JSON file per pytest process
(xdist workers included). Without the environment variable the plug-in does nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

ENV = "TRACKEVAL_OUTPUT_DIGESTS"
_records: dict[str, list[list[str]]] = defaultdict(list)
_current: list[str] = ["<collection>"]


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get(ENV):
        return
    from trackeval.io import results_folder

    original = results_folder.output_bytes

    def recording(result: Any) -> dict[str, bytes]:
        files = original(result)
        for name, data in files.items():
            _records[_current[0]].append([str(result.unit), name, hashlib.sha256(data).hexdigest()])
        return files

    results_folder.output_bytes = recording


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    _current[0] = item.nodeid
    try:
        return (yield)
    finally:
        _current[0] = "<between tests>"


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = os.environ.get(ENV)
    if not folder or not _records:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / f"{worker}.json").write_text(json.dumps(_records, indent=1, sort_keys=True), encoding="utf-8")


def _load(folder: Path) -> dict[str, list[list[str]]]:
    merged: dict[str, list[list[str]]] = defaultdict(list)
    for path in sorted(folder.glob("*.json")):
        for node, rows in json.loads(path.read_text(encoding="utf-8")).items():
            merged[node] += rows
    return merged


def compare(before: Path, after: Path) -> int:
    """Print the tests whose recorded digests differ; 0 when every test present in both agrees."""
    a, b = _load(before), _load(after)
    common = sorted(node for node in set(a) & set(b) if not node.startswith("<"))
    differ = [node for node in common if a[node] != b[node]]
    files = sum(len(a[node]) for node in common)
    print(f"{len(common)} tests with results in both runs, {files} files compared; {len(differ)} differ")
    # results built by fixtures (outside a test's call) depend on which worker ran what: each must exist before
    known = {tuple(row) for rows in a.values() for row in rows}
    fixtures = [tuple(row) for node, rows in b.items() if node.startswith("<") for row in rows]
    unknown = [row for row in fixtures if row not in known]
    print(f"{len(fixtures)} files built by fixtures after; {len(unknown)} not built anywhere before")
    for node in sorted((set(a) ^ set(b)) - {n for n in set(a) | set(b) if n.startswith("<")}):
        print(f"  only in {'before' if node in a else 'after'}: {node}")
    for node in differ:
        print(f"  DIFFERS: {node}")
    return 1 if differ or unknown else 0


if __name__ == "__main__":
    sys.exit(compare(Path(sys.argv[1]), Path(sys.argv[2])))
