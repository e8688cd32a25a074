"""UMD's audit (``trackeval audit umd``): subject overlap and duplicate images against a training manifest, and
the test set's coverage by the predictions.

The UMD spec names :func:`audit` as ``"trackeval.benchmarks.umd.audit:audit"`` (this module imports the adapter,
so the adapter cannot import it back).
"""

from __future__ import annotations

from pathlib import Path

from trackeval.benchmarks.umd.adapter import UMDInputs
from trackeval.benchmarks.umd.cases import audit_cases, load_cases
from trackeval.config import EvalConfig
from trackeval.spec import AuditReport


def audit(inputs: UMDInputs, cfg: EvalConfig, train_manifest: Path) -> AuditReport:
    """The split audits of ``inputs.ground_truth`` against ``train_manifest`` (a CSV: ``subject_id[,case_id,image]``;
    it replaces ``umd.train_manifest``), and one coverage line: cases without a prediction, predictions without
    a case. Raises :class:`~trackeval.errors.InputError` as :func:`~trackeval.benchmarks.umd.cases.load_cases` does."""
    cases, extra, _ = load_cases(inputs.ground_truth, inputs.predictions, inputs.format)
    findings = audit_cases(cases, cfg.umd.model_copy(update={"train_manifest": str(train_manifest)}))
    missing = sum(c.pred_path is None for c in cases)
    coverage = f"coverage: {missing} case(s) without prediction, {len(extra)} prediction(s) without case"
    return AuditReport(tuple(findings), (coverage,))
