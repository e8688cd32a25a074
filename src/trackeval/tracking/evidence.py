"""The evidence behind a comparison or a decision: the results.json artifacts of evaluation runs, read back and
validated, with their digests (sha256 of the artifact's bytes), and ``compare``'s operands.

A registered version's evidence is the evaluation runs its ``trackeval.eval_run.<unit>`` tags point to
(:func:`~trackeval.tracking.model_registry.eval_runs`); ``compare`` also takes results folders and run ids.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trackeval.config import GateConfig
from trackeval.errors import InputError
from trackeval.gate.compare import BenchmarkComparison
from trackeval.gate.decide import compare_unit
from trackeval.gate.policy import UnitPolicy
from trackeval.io.escape import visible_controls
from trackeval.io.hashing import sha256_bytes, sha256_files
from trackeval.io.results_folder import CASES_PARQUET, RESULTS_JSON, has_case_table, read_results, read_results_files
from trackeval.results import BenchmarkResult
from trackeval.tracking.client import Mlflow, check_model_ref, quote
from trackeval.tracking.model_registry import eval_runs, resolve_version

log = logging.getLogger(__name__)

#: an MLflow run id (fullmatch: ``$`` would also pass a trailing newline)
_RUN_ID = re.compile(r"[0-9a-f]{32}")
#: ``NAME/VERSION`` or ``NAME@ALIAS``: the name ends at the first ``/`` or ``@`` (a model name holds neither, see
#: :func:`~trackeval.tracking.client.check_model_ref`), so a version may hold both (``seg/v2/b``: version ``v2/b``)
_MODEL_REF = re.compile(r"([^/@]*)([/@])(.*)", re.DOTALL)


def run_evidence(ml: Mlflow, run_id: str) -> tuple[BenchmarkResult, str]:
    """The results.json artifact of an evaluation run (with its cases.parquet for a schema 2.x result, whose
    columns results.json's digests cover), verified, and its evidence digest: the sha256 of results.json's bytes
    (what ``track`` uploaded and tagged ``trackeval.results_digest``, unless it was overwritten)."""
    with tempfile.TemporaryDirectory(prefix="trackeval-results-") as tmp:
        path = Path(_download(ml, run_id, RESULTS_JSON, tmp))
        if has_case_table(path):
            _download(ml, run_id, CASES_PARQUET, tmp)
        verified = read_results_files(path)
        return verified.result, sha256_bytes(verified.files[RESULTS_JSON])


def _download(ml: Mlflow, run_id: str, name: str, folder: str) -> str:
    return ml.call("download_artifacts", ml.client.download_artifacts, run_id, name, folder)


def run_results(ml: Mlflow, run_id: str) -> BenchmarkResult:
    """The results.json artifact of an evaluation run, validated."""
    return run_evidence(ml, run_id)[0]


def run_digest(ml: Mlflow, run_id: str) -> str:
    """The evidence digest of an evaluation run: the sha256 of its results.json artifact as stored now."""
    with tempfile.TemporaryDirectory(prefix="trackeval-results-") as tmp:
        return sha256_files(Path(_download(ml, run_id, RESULTS_JSON, tmp)))


def version_evaluations(ml: Mlflow, mv: Any) -> tuple[dict[str, BenchmarkResult], dict[str, str]]:
    """``({unit: results}, {tag unit: evidence digest})`` of a registered version's evaluation runs."""
    results: dict[str, BenchmarkResult] = {}
    evidence: dict[str, str] = {}
    for tag_unit, run_id in sorted(eval_runs(mv).items(), key=lambda kv: kv[0].count("/")):  # legacy tags first
        result, digest = run_evidence(ml, run_id)
        results[result.unit] = result
        evidence[tag_unit] = digest
    return dict(sorted(results.items())), dict(sorted(evidence.items()))


def version_results(ml: Mlflow, mv: Any) -> dict[str, BenchmarkResult]:
    """``{unit: results}`` of a registered version's latest evaluation runs (its ``eval_run.<unit>`` tags).

    Keyed by each result's own unit, so a tag written before units existed (``eval_run.xray``) still lands on
    ``xray/<task>``; a unit-specific tag wins over such a legacy one.
    """
    return version_evaluations(ml, mv)[0]


def resolve_ref(ml: Mlflow, ref: str) -> tuple[str, dict[str, BenchmarkResult]]:
    """``compare`` operands: a results folder, a run id (an evaluation run or its parent), ``name/version``
    or ``name@alias``. Returns a label and ``{unit: results}``."""
    path = Path(ref)
    if (path / RESULTS_JSON).is_file() or (path.suffix == ".json" and path.is_file()):
        result = read_results(path)
        return ref, {result.unit: result}
    if _RUN_ID.fullmatch(ref):
        children = ml.search(f"tags.`mlflow.parentRunId` = {quote(ref)} and attributes.status = 'FINISHED'")
        if children:
            results = [run_results(ml, r.info.run_id) for r in reversed(children)]
            return ref, {r.unit: r for r in results}
        result = run_results(ml, ref)
        return ref, {result.unit: result}
    found = _MODEL_REF.fullmatch(ref)
    if found is None:
        raise InputError(
            f"cannot resolve {ref!r}: expected a results folder, a run id, NAME/VERSION or NAME@ALIAS", field="ref"
        )
    name, sep, version = found.groups()
    version = "@" + version if sep == "@" else check_model_ref(version, "version")  # NAME/@x is no alias
    return ref, version_results(ml, resolve_version(ml, name, version))


def compare_refs(
    ml: Mlflow, a: str, b: str, g: GateConfig, policies: Mapping[str, UnitPolicy]
) -> tuple[list[BenchmarkComparison], list[tuple[BenchmarkResult, BenchmarkResult]]]:
    """Paired comparisons (``a - b``) of every unit both sides were evaluated on (each on its primary metric),
    and the ``(a, b)`` results of those units (for figures that overlay both versions)."""
    label_a, res_a = resolve_ref(ml, a)
    label_b, res_b = resolve_ref(ml, b)
    for ref, results in ((a, res_a), (b, res_b)):
        if not results:
            raise InputError(f"{ref} has no evaluation to compare (no trackeval.eval_run.<unit> tag)", field="ref")
    common = sorted(set(res_a) & set(res_b))
    if not common:
        raise InputError(f"{a} and {b} share no benchmark unit ({sorted(res_a)} vs {sorted(res_b)})", field="unit")
    if all(res_a[unit] == res_b[unit] for unit in common):
        same = "%s and %s hold the same evaluation (the same results): every delta is 0"
        log.warning(same, visible_controls(a), visible_controls(b))  # user text: no line break or ESC reaches the log
    out = []
    for unit in common:
        policy = policies.get(unit)
        if policy is None:
            raise InputError(f"{unit} is not a registered benchmark unit (is its plug-in installed?)", field="unit")
        out.append(compare_unit(res_a[unit], res_b[unit], policy, g, (label_a, label_b)))
    return out, [(res_a[unit], res_b[unit]) for unit in common]
