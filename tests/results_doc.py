"""results.json as a document with its case records inline, as schema 1.x wrote it: the tests that check case
values by walking the JSON read results folders through this (schema 2.x keeps the records in cases.parquet)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trackeval.io.results_folder import RESULTS_JSON, read_results


def results_doc(path: Path) -> dict[str, Any]:
    """The verified results folder (or results.json path) as a JSON document whose ``cases`` is the list of case
    records (``case_id``, ``subject_id``, ``groups``, ``metrics``, ``status``, ``message``)."""
    path = Path(path)
    folder = path.parent if path.suffix == ".json" else path
    doc = json.loads((folder / RESULTS_JSON).read_text(encoding="utf-8"))
    doc["cases"] = [case.model_dump(mode="json") for case in read_results(folder).cases]
    return doc
