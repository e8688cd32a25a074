"""Promotion-gate configuration: the ``gate`` section of params.yaml.

The gate compares a candidate model version with the ``champion`` alias on the same cases (see
:mod:`trackeval.gate.decide`). Margins are in the units of each benchmark's primary metric (Dice, AP, AUROC:
fractions in [0, 1]); each unit declares its metric's direction.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from trackeval.config.base import KEY_TOKEN, FiniteFloat, Resamples, Section, Seed

Margin = Annotated[FiniteFloat, Field(ge=0.0)]


def _check_keys(v: dict[str, object], what: str) -> dict[str, object]:
    for key in v:
        if not all(KEY_TOKEN.fullmatch(t) for t in key.split("/")):
            raise ValueError(f"{what} key {key!r} must be [a-z0-9_] tokens joined by '/'")
    return v


class GateConfig(Section):
    """Promotion gate: candidate vs ``champion``, paired on case ids.

    Keys of ``primary_metrics``, ``margins``, ``floors`` and ``superiority`` are benchmark unit names
    (``umd``, ``xray/seg``) or benchmark names (``xray``: every X-ray task); the most specific entry wins and a
    unit without one uses the default its spec declares (:class:`trackeval.spec.PrimaryMetric`).
    ``primary_metrics``: the gated metric, as a key path relative to the config key (``{xray: cls/auroc}``
    gates unit ``xray/cls`` on ``xray/cls/auroc``; other X-ray tasks keep their declared metric).
    ``margins``: non-inferiority margin: pass if the lower 95% bound of the paired difference (candidate -
    champion) is above ``-margin`` (for a lower-is-better metric: the upper bound below ``+margin``).
    ``group_margins``: worst-group guard margins, keyed by unit or benchmark, optionally followed by
    ``/<dimension>`` and ``/<dimension>/<group>`` (most specific wins).
    ``group_dimensions``: breakdowns checked (items such as organs, and case groups such as modality); unset:
    each unit's declared dimensions.
    ``group_test``: ``harm`` flags a group when the data show it regressed by more than its margin
    (one-sided paired-bootstrap test of ``delta < -margin``, p-values adjusted over all groups by
    ``multiplicity``); ``noninferiority`` requires every group to be shown non-inferior (``delta > -margin``
    at level ``alpha``; an intersection-union test, which needs no multiplicity adjustment).
    ``superiority``: also require the lower bound > 0. ``floors``: absolute floors of the primary metric (its
    ``floor_statistic``: ``ci95_low``, the conservative end of the CI (the upper end for a lower-is-better
    metric; default), or the point estimate ``value``) for a first version without champion and for units the
    champion was never evaluated on. ``require_audits``: leakage audits must pass.

    Signed decisions (docs/gate.md, "Signed decisions"): ``signing_key``: the Ed25519 private key file that
    ``promote`` signs each decision with (``TRACKEVAL_GATE_KEY`` in the environment overrides it; neither: the
    decision is recorded ``unsigned``). ``trusted_keys``: public key files (``gate.pub``) whose signatures
    ``verify`` accepts; empty: ``verify`` checks the records' consistency only and says ``unsigned``. Paths are
    relative to the working directory. Neither is part of the recorded gate config (machine paths stay out of
    the store, and rotating a key does not change a decision's identity).
    """

    primary_metrics: dict[str, str] = Field(default_factory=dict)
    margins: dict[str, Margin] = Field(default_factory=dict)
    group_margins: dict[str, Margin] = Field(default_factory=dict)
    group_dimensions: tuple[str, ...] | None = None
    group_test: Literal["harm", "noninferiority"] = "harm"
    multiplicity: Literal["holm", "bonferroni", "none"] = "holm"
    alpha: FiniteFloat = Field(0.05, gt=0.0, lt=1.0)
    confidence: FiniteFloat = Field(0.95, gt=0.0, lt=1.0)
    superiority: dict[str, bool] = Field(default_factory=dict)
    floors: dict[str, FiniteFloat] = Field(default_factory=dict)
    floor_statistic: Literal["value", "ci95_low"] = "ci95_low"
    require_audits: bool = True
    n_resamples: Resamples = 2000
    seed: Seed = 0
    signing_key: str | None = Field(None, exclude=True)
    trusted_keys: tuple[str, ...] = Field((), exclude=True)

    @field_validator("primary_metrics", "margins", "group_margins", "superiority", "floors")
    @classmethod
    def _keys(cls, v: dict) -> dict:
        return _check_keys(v, "gate")
