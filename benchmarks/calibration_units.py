"""IMIS and 3D-MIR rows of ``bench_gate_calibration.py`` (``--imis``, ``--mir3d``), by seeded simulation.

Both measure, at the product's default config (``bootstrap.n_resamples`` 1000 unless given, ``gate.n_resamples``
2000, the units' declared margins 0.01), the coverage of the champion's headline 95% CI, the pass rate of the
non-inferiority check of ``trackeval.gate.decide.decide`` (what ``trackeval promote`` runs) for a candidate truly
worse by exactly the margin (type I) and the coverage of the gate's delta CI. Only per-case values are simulated,
so that the truth is known; records, aggregates and results are built by the adapters' own functions.

IMIS (``imis/dice_auc``, reduction ``case_mean``, cluster = subject): subjects of 1-4 images (2D slices of a 3D
layout, ``totalseg-mri``: the layout whose cases carry a subject, ``bootstrap.cluster: subject_id``), each image
with 1-3 of three structures as targets. A target's point-click Dice curve is ``Phi(a + g_t + shift + u + w +
e)`` for clicks t = 1..9 (``g_t`` a saturating gain), ``u ~ N(0, 0.3)`` the subject effect (latent ICC 0.3),
``w ~ N(0, 0.35)`` shared by the two versions and ``e ~ N(0, 0.35)`` each version's own. Each Dice is turned into
a mask pair with that Dice (4000 pixels; Dice resolution 2.5e-4) and scored by ``imis.sequence_metrics``; the
records are ``imis._record``, aggregated by ``imis.aggregate`` and wrapped by ``finish`` as ``imis.evaluate``
does. The true headline is ``sum_t w_t Phi((a + g_t + shift) / sqrt(2))`` (``w_t`` the trapezoid weights of
``dice_auc``); the candidate's shift makes it exactly ``margin`` lower.

3D-MIR (``mir3d/group/ap_at_10``, reduction ``item_mean`` over the four regions, cluster = query volume): the
bundled 3D-MIR test splits (``load_ground_truth``: 107 queries of 98 volumes, 8 volumes queried in 2-3 regions;
the adapter's ``subject_id`` is the volume, so those are the clusters). Each replication draws 24, 49 or 98 of
the volumes (without replacement, redrawn until every region has 2 queries), keeping their regions and labels.
A query's AP@10 is ``Phi(a_r + u + w + e)`` with latent variance 2.25 (U-shaped on [0, 1], as per-query AP is),
the volume effect ``u`` 30% of it (shared by the volume's regions), ``w`` 35% shared by both versions and ``e``
35% each version's own; region means ``MIR3D_MEANS``. Records by ``mir3d._records``, aggregates by
``mir3d.aggregate``; the other metric columns copy the simulated AP (the gate reads ``group/ap_at_10`` only).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.special import ndtr, ndtri

from trackeval.api import gate_policies, load_config
from trackeval.benchmarks.imis import adapter as imis_adapter
from trackeval.benchmarks.imis import aggregates as imis_aggregates
from trackeval.benchmarks.imis import scoring as imis_scoring
from trackeval.benchmarks.imis.cases import LAYOUTS, IMISCase
from trackeval.benchmarks.imis.volumes import TOTALSEG
from trackeval.benchmarks.mir3d import adapter as mir3d
from trackeval.benchmarks.mir3d import readers as mir3d_readers
from trackeval.config import EvalConfig
from trackeval.demo.mir3d_baselines import data_dir
from trackeval.engine.driver import Evaluation, finish
from trackeval.gate.decide import decide
from trackeval.results import BenchmarkResult

Row = tuple[str, float, str, bool]
#: IMIS images: ``(case id, subject, targets)``
ImisDesign = list[tuple[str, str, tuple[str, ...]]]
#: 3D-MIR: the regions' truths restricted to the drawn queries
Mir3dDesign = dict[str, mir3d_readers.RegionTruth]

IMIS_CLICKS = 9
IMIS_A = 0.3  # latent level of click 1: mean Dice 0.58 at click 1, 0.84 at click 9
IMIS_GAIN = 1.2 * (1 - np.exp(-np.arange(IMIS_CLICKS) / 3))
IMIS_TRAPEZOID = np.r_[0.5, np.ones(IMIS_CLICKS - 2), 0.5] / (IMIS_CLICKS - 1)
IMIS_STRUCTURES = ("kidney_left", "liver", "spleen")
IMIS_ICC = 0.3
IMIS_PIXELS = 4000
MIR3D_MEANS = {"colon": 0.45, "liver": 0.55, "lung": 0.50, "pancreas": 0.60}
MIR3D_SD = 1.5
TYPE_I = "gate type I (pass at delta = -margin)"
IMIS_LABELS = ("imis/dice_auc CI coverage", f"imis {TYPE_I}", "imis delta CI coverage at delta = -margin")
MIR3D_LABELS = ("mir3d/group/ap_at_10 CI coverage", f"mir3d {TYPE_I}", "mir3d delta CI coverage at delta = -margin")


def _rows(counts: np.ndarray, reps: int, labels: tuple[str, str, str], what: str, small: bool) -> list[Row]:
    """The three rows of one setting: headline coverage, type I and delta coverage (``counts`` of ``reps``), with
    the table's targets (coverage >= 93%, type I <= 3%; >= 90% and <= 5% at the smallest setting)."""
    cov, rate, dcov = counts / reps
    cov_target, err_target = (0.90, 0.05) if small else (0.93, 0.03)
    return [
        (f"{labels[0]}, {what}", cov, f">= {cov_target:.0%}", cov >= cov_target),
        (f"{labels[1]}, {what}", rate, f"<= {err_target:.0%}", rate <= err_target),
        (f"{labels[2]}, {what}", dcov, "reported", True),
    ]


def _gate_counts(
    unit: str, base: BenchmarkResult, cand: BenchmarkResult, cfg: EvalConfig, truth: float
) -> tuple[bool, bool, bool]:
    """(headline CI covers ``truth``, non-inferiority passed, delta CI covers ``-margin``) of one replication."""
    policies = gate_policies(cfg)
    head = base.aggregates[policies[unit].key]
    covered = head.ci95_low is not None and head.ci95_low <= truth <= head.ci95_high
    d = decide("sim", "v2", {unit: cand}, "v1", {unit: base}, cfg.gate, policies)
    assert d.comparisons, [c.detail for c in d.checks if not c.passed]
    row = d.comparisons[0].rows[0]
    margin = policies[unit].margin
    passed = any(c.name == "non_inferiority" and c.passed for c in d.checks)
    delta_covered = row.ci95_low is not None and row.ci95_low <= -margin <= row.ci95_high
    return covered, passed, delta_covered


def _calibration_rows(
    unit: str,
    sizes: tuple[int, ...],
    seed: tuple[int, int],
    reps: int,
    replicate: Callable[[np.random.Generator, int], tuple[BenchmarkResult, BenchmarkResult]],
    cfg: EvalConfig,
    truth: float,
    labels: tuple[str, str, str],
    what: str,
) -> list[Row]:
    """The rows of every size: ``reps`` replications of ``replicate(rng, size)`` (champion and candidate results)
    gated (:func:`_gate_counts`), the generator seeded ``[seed[0], size, seed[1]]``; ``what`` formats the size."""
    rows: list[Row] = []
    for size in sizes:
        rng = np.random.default_rng([seed[0], size, seed[1]])
        counts = np.zeros(3)
        for _ in range(reps):
            base, cand = replicate(rng, size)
            counts += _gate_counts(unit, base, cand, cfg, truth)
        rows += _rows(counts, reps, labels, what.format(size), size == min(sizes))
    return rows


# ------------------------------------------------------------------ IMIS


def imis_truth(shift: float) -> float:
    """The true ``imis/dice_auc`` (expected per-target Dice AUC) at a latent ``shift``."""
    return float(IMIS_TRAPEZOID @ ndtr((IMIS_A + IMIS_GAIN + shift) / math.sqrt(2.0)))


def imis_shift(target: float) -> float:
    """The latent shift whose true headline is ``target`` (bisection; the truth is increasing in the shift)."""
    low, high = -3.0, 3.0
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if imis_truth(mid) < target else (low, mid)
    return (low + high) / 2


def _imis_design(rng: np.random.Generator, subjects: int) -> ImisDesign:
    """``(case id, subject, targets)`` of every image: subjects of 1-4 images, images of 1-3 structures."""
    out = []
    for s in range(subjects):
        for i in range(int(rng.integers(1, 5))):
            k = int(rng.integers(1, 4))
            targets = tuple(sorted(rng.choice(IMIS_STRUCTURES, k, replace=False)))
            out.append((f"s{s:03d}_axial_{i:04d}", f"s{s:03d}", targets))
    return out


def _imis_latents(rng: np.random.Generator, design: ImisDesign, shifts: tuple[float, float]) -> list[np.ndarray]:
    """Champion and candidate latent levels ``(targets,)`` (subject effect, shared and own noise; module doc)."""
    subjects = sorted({s for _, s, _ in design})
    u = dict(zip(subjects, rng.normal(0.0, math.sqrt(IMIS_ICC), len(subjects)), strict=True))
    base = np.array([u[s] for _, s, targets in design for _ in targets])
    base = base + rng.normal(0.0, math.sqrt((1 - IMIS_ICC) / 2), base.size)
    return [IMIS_A + shift + base + rng.normal(0.0, math.sqrt((1 - IMIS_ICC) / 2), base.size) for shift in shifts]


def _mask(dice: float) -> np.ndarray:
    """A prediction whose Dice with the all-foreground truth of ``IMIS_PIXELS`` pixels is ``dice`` (to 2.5e-4)."""
    mask = np.zeros(IMIS_PIXELS, dtype=bool)
    mask[: int(round(IMIS_PIXELS * dice / (2 - dice)))] = True
    return mask


def _imis_result(design: ImisDesign, latent: np.ndarray, cfg: EvalConfig, version: str) -> BenchmarkResult:
    """The BenchmarkResult ``imis.evaluate`` builds for these click curves (the adapter's scoring and aggregates)."""
    truth = np.ones(IMIS_PIXELS, dtype=bool)
    prompts = ("point",)
    curves = iter(ndtr(latent[:, None] + IMIS_GAIN[None, :]))
    records = []
    for case_id, subject, targets in design:
        case = IMISCase(case_id, Path(case_id), Path(case_id), "mri", "abdomen", {}, TOTALSEG, None, subject)
        metrics = {
            t: imis_scoring.sequence_metrics(truth, {"point": [_mask(d) for d in next(curves)]}, cfg.imis)
            for t in targets
        }
        records.append(imis_scoring._record(case, metrics))
    evaluation = Evaluation(
        records=records,
        aggregates=imis_aggregates.aggregate(records, cfg, prompts),
        item_kind="target",
        ground_truth_digest="simulated",
        predictions_digest=version,
        summary=imis_adapter._summary(records, cfg.imis, prompts),
        formats={"ground_truth": TOTALSEG},
    )
    layout = next(x for x in LAYOUTS if x.name == TOTALSEG)
    return finish(
        "imis", evaluation, config=imis_adapter._config(cfg, layout), model={"name": "sim", "version": version}
    )


def imis_rates(reps: int, resamples: int, seed: int, subjects: tuple[int, ...] = (6, 12, 30)) -> list[Row]:
    """Headline coverage, type I and delta coverage of IMIS for subjects of 1-4 images (module docstring)."""
    cfg = load_config(None, ["imis.prompt_types=[point]", f"bootstrap.n_resamples={resamples}"])
    logging.getLogger("trackeval").setLevel(logging.ERROR)
    margin = gate_policies(cfg)["imis"].margin
    truth = imis_truth(0.0)
    shifts = (0.0, imis_shift(truth - margin))

    def replicate(rng: np.random.Generator, n: int) -> tuple[BenchmarkResult, BenchmarkResult]:
        design = _imis_design(rng, n)
        champion, candidate = _imis_latents(rng, design, shifts)
        return _imis_result(design, champion, cfg, "v1"), _imis_result(design, candidate, cfg, "v2")

    what = "{} subjects of 1-4 images, 1-3 targets each, ICC 0.3"
    return _calibration_rows("imis", subjects, (seed, 44), reps, replicate, cfg, truth, IMIS_LABELS, what)


# ------------------------------------------------------------------ 3D-MIR


def _mir3d_truth() -> Mir3dDesign:
    """The bundled 3D-MIR labels and splits, read by the adapter (every region)."""
    return mir3d_readers.load_ground_truth(data_dir())


def _mir3d_design(rng: np.random.Generator, truth: Mir3dDesign, volumes: int) -> Mir3dDesign:
    """The regions' truths restricted to ``volumes`` query volumes drawn without replacement (every region left
    with at least 2 queries; all of them when ``volumes`` is their number)."""
    names = sorted({q for t in truth.values() for q in t.queries})
    while True:
        chosen = set(rng.choice(names, volumes, replace=False))
        sub = {r: dataclasses.replace(t, queries=tuple(q for q in t.queries if q in chosen)) for r, t in truth.items()}
        if all(len(t.queries) >= 2 for t in sub.values()):
            return sub


def _mir3d_latents(
    rng: np.random.Generator, design: Mir3dDesign, shifts: dict[str, tuple[float, float]]
) -> list[dict[str, np.ndarray]]:
    """Champion and candidate AP@10 per region ``{region: (queries,)}`` (volume effect, shared and own noise)."""
    volumes = sorted({q for t in design.values() for q in t.queries})
    u = dict(zip(volumes, rng.normal(0.0, MIR3D_SD * math.sqrt(0.3), len(volumes)), strict=True))
    sides: list[dict[str, np.ndarray]] = [{}, {}]
    for region, t in design.items():
        base = np.array([u[q] for q in t.queries]) + rng.normal(0.0, MIR3D_SD * math.sqrt(0.35), len(t.queries))
        for side in (0, 1):
            own = rng.normal(0.0, MIR3D_SD * math.sqrt(0.35), len(t.queries))
            sides[side][region] = ndtr(shifts[region][side] + base + own)
    return sides


def _mir3d_result(design: Mir3dDesign, ap: dict[str, np.ndarray], cfg: EvalConfig, version: str) -> BenchmarkResult:
    """The BenchmarkResult ``mir3d.evaluate`` builds for these per-query values (the adapter's records and
    aggregates; every metric column holds the simulated AP@10)."""
    mcfg = cfg.mir3d
    names = [*(f"p_at_{k}" for k in mcfg.ks), f"ap_at_{mcfg.ap_k}"]
    records = []
    for region, t in design.items():
        lists = {(region, q): mir3d_readers.RankedList(region, q, tuple(range(mcfg.depth))) for q in t.queries}
        scores = {kind: dict.fromkeys(names, ap[region]) for kind in mir3d_readers.RELEVANCE}
        records += mir3d._records(t, scores, lists, mcfg.depth)
    evaluation = Evaluation(
        records, mir3d.aggregate(records, list(design), cfg), "region", "simulated", version,
        mir3d._summary(design, records, 0, 0), [],
    )  # fmt: skip
    config = cfg.model_dump(mode="json", include={"bootstrap", "mir3d"})
    return finish("mir3d", evaluation, config=config, model={"name": "sim", "version": version})


def mir3d_rates(reps: int, resamples: int, seed: int, volumes: tuple[int, ...] = (24, 49, 98)) -> list[Row]:
    """Headline coverage, type I and delta coverage of 3D-MIR on subsets of the real query volumes (module doc)."""
    cfg = load_config(None, [f"bootstrap.n_resamples={resamples}"])
    logging.getLogger("trackeval").setLevel(logging.ERROR)
    margin = gate_policies(cfg)["mir3d"].margin
    scale = math.sqrt(1 + MIR3D_SD**2)  # E Phi(m + N(0, s^2)) = Phi(m / sqrt(1 + s^2))
    shifts = {r: (scale * ndtri(m), scale * ndtri(m - margin)) for r, m in MIR3D_MEANS.items()}
    truth = float(np.mean(list(MIR3D_MEANS.values())))
    full = _mir3d_truth()
    assert sorted(full) == sorted(MIR3D_MEANS)

    def replicate(rng: np.random.Generator, m: int) -> tuple[BenchmarkResult, BenchmarkResult]:
        design = _mir3d_design(rng, full, m)
        champion, candidate = _mir3d_latents(rng, design, shifts)
        return _mir3d_result(design, champion, cfg, "v1"), _mir3d_result(design, candidate, cfg, "v2")

    what = "{} query volumes of the 3D-MIR test splits, 4 regions, volume ICC 0.3"
    return _calibration_rows("mir3d", volumes, (seed, 55), reps, replicate, cfg, truth, MIR3D_LABELS, what)
