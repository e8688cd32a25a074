"""Tracking (MLflow) and promotion-gate configuration: the ``tracking`` and ``gate`` sections of params.yaml.

The gate compares a candidate model version with the ``champion`` alias on the same cases (see
:mod:`trackeval.gate.decide`). Margins are in the units of each benchmark's primary metric (Dice, AP, AUROC:
fractions in [0, 1]); every primary metric is higher-is-better.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from trackeval.config.base import KEY_TOKEN, PositiveInt, Section
from trackeval.errors import ConfigError

#: Primary metric per benchmark: ``<benchmark>/<primary>`` is the headline aggregate key, and the last token
#: is the per-case metric (``CaseRecord.metrics[item][token]``) that the paired statistics use.
PRIMARY_METRICS: dict[str, str] = {"umd": "dsc", "mir3d": "group/ap_at_10", "xray": "cls/auroc", "imis": "dice"}

Margin = Annotated[float, Field(ge=0.0)]


def _check_keys(v: dict[str, object], what: str) -> dict[str, object]:
    for key in v:
        if not all(KEY_TOKEN.match(t) for t in key.split("/")):
            raise ValueError(f"{what} key {key!r} must be [a-z0-9_] tokens joined by '/'")
    return v


class TrackingConfig(Section):
    """Where and how results are logged to MLflow.

    ``uri``: tracking (and registry) URI; ``MLFLOW_TRACKING_URI`` in the environment overrides it. The default
    is the embedded SQLite store ``sqlite:///mlflow.db`` (relative to the working directory).
    ``artifact_location``: local folder for artifacts of a new experiment on a non-HTTP store (a server
    chooses its own). ``experiment``: experiment name. ``retries``: extra attempts per MLflow call after a
    transient failure (server unreachable, 5xx, database locked), waiting ``backoff_s * 2**attempt`` seconds
    in between; ``http_timeout_s``: per-request timeout (s) against a server (MLflow's own retries are off,
    so the total wait stays bounded). ``dvc_root``: folder searched for ``data.dvc`` / ``dvc.lock``.
    """

    uri: str = "sqlite:///mlflow.db"
    artifact_location: str = "mlartifacts"
    experiment: str = "trackeval"
    retries: Annotated[int, Field(ge=0, le=10)] = 3
    backoff_s: Annotated[float, Field(ge=0.0)] = 0.5
    http_timeout_s: PositiveInt = 10
    dvc_root: str = "."


class GateConfig(Section):
    """Promotion gate: candidate vs ``champion``, paired on case ids.

    ``primary_metrics``: ``{benchmark: metric}`` gated per benchmark (:data:`PRIMARY_METRICS`).
    ``margins``: non-inferiority margin per benchmark: pass if the lower 95% bound of the paired difference
    (candidate - champion) is above ``-margin``. ``group_margins``: worst-group guard margins, keyed by
    ``<benchmark>``, ``<benchmark>/<dimension>`` or ``<benchmark>/<dimension>/<group>`` (most specific wins).
    ``group_dimensions``: breakdowns checked (items such as organs, and case groups such as modality).
    ``group_test``: ``harm`` flags a group when the data show it regressed by more than its margin
    (one-sided paired-bootstrap test of ``delta < -margin``, p-values adjusted over all groups by
    ``multiplicity``); ``noninferiority`` requires every group to be shown non-inferior (``delta > -margin``
    at level ``alpha``; an intersection-union test, which needs no multiplicity adjustment).
    ``superiority``: per benchmark, also require the lower bound > 0. ``floors``: absolute floors of the
    primary metric (its ``floor_statistic``: point estimate or CI low) for a first version without champion
    and for benchmarks the champion was never evaluated on. ``require_audits``: leakage audits must pass.
    """

    primary_metrics: dict[str, str] = Field(default_factory=lambda: dict(PRIMARY_METRICS))
    margins: dict[str, Margin] = Field(default_factory=lambda: {"umd": 0.01, "mir3d": 0.01, "xray": 0.01, "imis": 0.01})
    group_margins: dict[str, Margin] = Field(
        default_factory=lambda: {"umd": 0.05, "mir3d": 0.05, "xray": 0.05, "imis": 0.05}
    )
    group_dimensions: tuple[str, ...] = ("organ", "region", "finding", "modality")
    group_test: Literal["harm", "noninferiority"] = "harm"
    multiplicity: Literal["holm", "bonferroni", "none"] = "holm"
    alpha: float = Field(0.05, gt=0.0, lt=1.0)
    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    superiority: dict[str, bool] = Field(default_factory=dict)
    floors: dict[str, float] = Field(default_factory=lambda: {"umd": 0.5, "mir3d": 0.1, "xray": 0.6, "imis": 0.5})
    floor_statistic: Literal["value", "ci95_low"] = "value"
    require_audits: bool = True
    n_resamples: PositiveInt = 2000
    seed: int = 0

    @field_validator("primary_metrics", "margins", "group_margins", "superiority", "floors")
    @classmethod
    def _keys(cls, v: dict) -> dict:
        return _check_keys(v, "gate")

    def group_margin(self, benchmark: str, dimension: str, group: str) -> float:
        """The margin of one breakdown group: the most specific of ``b/d/g``, ``b/d``, ``b``; else the
        benchmark's non-inferiority margin."""
        for key in (f"{benchmark}/{dimension}/{group}", f"{benchmark}/{dimension}", benchmark):
            if key in self.group_margins:
                return self.group_margins[key]
        return self.margin(benchmark)

    def margin(self, benchmark: str) -> float:
        """Non-inferiority margin of ``benchmark``; a benchmark without one is a configuration error."""
        if benchmark not in self.margins:
            raise ConfigError(f"invalid config: field gate.margins: no margin for benchmark {benchmark!r}")
        return self.margins[benchmark]
