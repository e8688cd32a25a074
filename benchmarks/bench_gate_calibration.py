"""Operating characteristics of the headline CIs and the promotion gate, measured by seeded simulation.

Run: ``.venv/bin/python benchmarks/bench_gate_calibration.py [--reps 1000] [--quick]``

Everything goes through the product's own code: per-case UMD records (subjects with a CT and a PET scan, three
organs) are aggregated by ``trackeval.benchmarks.umd.aggregate`` into a real ``BenchmarkResult`` (the same call
``trackeval evaluate umd`` makes after scoring the NIfTI files), and two versions are gated by
``trackeval.gate.decide.decide`` with the default gate config (what ``trackeval promote`` runs). Only the
per-case Dice values are simulated, so that the truth is known:

``dice[subject, scan, organ] = mu_organ + delta + u[subject, organ] + e[subject, scan, organ]`` with
``u ~ N(0, icc s^2)``, ``e ~ N(0, (1 - icc) s^2)``, ``s = 0.05``, ``mu = (0.70, 0.75, 0.80)``: ``icc`` is the
within-subject correlation of a subject's two scans. The candidate shares the champion's subject effects and
half of its scan noise (two versions on the same cases are correlated). Values are not clipped, so the true
headline is exactly ``mean(mu) + delta`` (a value outside [0, 1] is a 4-sigma event here, and the statistics do
not depend on the range).

Printed, each as measured vs target:

* coverage of the 95% CI of ``umd/dsc`` at 6, 12, 30, 100 subjects and ICC 0, 0.3, 0.7
  (target >= 93% from 12 subjects, >= 90% at 6);
* the gate's pass rate at a true delta of ``-margin`` (type I error; target <= 3% from 12 subjects, <= 5% at
  6), at delta 0 (false refusals) and a power curve (delta +0.01, n = 6, 20, 50, 200);
* DeLong coverage of the ``xray/cls/auroc`` CI at AUROC 0.7 and 0.9 with 20 and 100 positives (4 negatives
  per positive; the interval the X-ray classification adapter reports; at least 2000 replications; target
  >= 93%);
* the audit's scenarios: a candidate painting an organ the truth lacks, and one missing predictions under
  ``exclude`` (target: refused);
* ``--xray``: clustered X-ray ``cls`` (patients with 1-6 studies, labels clustered by a patient propensity,
  scores sharing a patient effect; 20 / 50 / 200 positives at 20% prevalence): coverage of the headline
  ``xray/cls/auroc`` CI, the gate's pass rate at a true macro AUROC delta of ``-margin`` (type I, target <= 3%)
  and the coverage of the delta CI, every replication written as MIMIC-CXR-JPG files and run through
  ``trackeval.benchmarks.xray.evaluate`` and ``decide`` (at least 2000 replications);
* ``--guard``: the worst-group guard's family-wise refusal rate at its least favourable null: 13 organs, every
  organ (hence both modalities: 15 groups) exactly at ``-group_margin`` (0.05), at 6 / 12 / 30 / 100 subjects
  (target <= 5%; at least 2000 replications);
* ``--imis`` / ``--mir3d``: headline CI coverage, type I and delta CI coverage of IMIS (subjects of 1-4 images,
  ``imis/dice_auc``) and 3D-MIR (query volumes of the bundled test splits, ``mir3d/group/ap_at_10``), simulated
  in ``calibration_units.py`` (its docstring; at least 2000 replications, gate resamples 2000).

The Monte-Carlo standard error of a rate p over R replications is sqrt(p (1 - p) / R): about 0.7 points for a
95% coverage at R = 1000, 0.5 points for a 3% error rate.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

import calibration_units
from trackeval.api import gate_policies, load_config
from trackeval.benchmarks import umd
from trackeval.config import EvalConfig
from trackeval.gate.decide import decide
from trackeval.results import BenchmarkResult, CaseRecord, build_result

ORGANS = ("liver", "spleen", "heart")
MU = np.array([0.70, 0.75, 0.80])
SD = 0.05
MARGIN = 0.01


def _config(n_resamples: int) -> EvalConfig:
    return load_config(
        None,
        [
            "umd.labels={liver: 1, spleen: 2, heart: 3}",
            "umd.metrics=[dsc]",
            "umd.modality_pairs=[]",
            f"bootstrap.n_resamples={n_resamples}",
            f"gate.n_resamples={n_resamples}",
            f"gate.margins={{umd: {MARGIN}}}",
        ],
    )


def _records(dice: np.ndarray, missing: int = 0, organs: tuple[str, ...] = ORGANS) -> list[CaseRecord]:
    """Case records of ``dice[subject, scan, organ]`` (NaN = not applicable); the first ``missing`` cases carry
    no prediction (status ``missing_prediction``, no values: ``umd.missing_prediction: exclude``)."""
    out = []
    k = 0
    for s in range(dice.shape[0]):
        for m, modality in enumerate(("ct", "pet")):
            absent = k < missing
            out.append(
                CaseRecord(
                    case_id=f"s{s:03d}_{modality}",
                    subject_id=f"s{s:03d}",
                    groups={"modality": modality},
                    metrics={o: ({} if absent else {"dsc": float(dice[s, m, j])}) for j, o in enumerate(organs)},
                    status="missing_prediction" if absent else "ok",
                )
            )
            k += 1
    return out


def _result(records: list[CaseRecord], cfg: EvalConfig, version: str) -> BenchmarkResult:
    """The BenchmarkResult ``umd.evaluate`` builds from these records (aggregates by the adapter's own code)."""
    return build_result(
        "umd",
        model={"name": "seg", "version": version},
        config=cfg.model_dump(mode="json", include={"bootstrap", "umd"}),
        ground_truth_digest="simulated",
        predictions_digest=version,
        summary={"n_cases": len(records), "n_missing_predictions": sum(r.status != "ok" for r in records)},
        warnings=[],
        cases=records,
        aggregates=umd.aggregate(records, cfg),
        item_kind="organ",
    )


def _pair(rng: np.random.Generator, n: int, icc: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Champion and candidate Dice ``(n, 2, 3)`` on the same subjects (see the module docstring)."""
    u = rng.normal(0.0, SD * math.sqrt(icc), (n, 1, 3))
    shared = rng.normal(0.0, SD * math.sqrt((1 - icc) / 2), (n, 2, 3))
    e_a = rng.normal(0.0, SD * math.sqrt((1 - icc) / 2), (n, 2, 3))
    e_b = rng.normal(0.0, SD * math.sqrt((1 - icc) / 2), (n, 2, 3))
    champion = MU + u + shared + e_a
    candidate = MU + delta + u + shared + e_b
    return champion, candidate


def _gate(champion: BenchmarkResult, candidate: BenchmarkResult, cfg: EvalConfig) -> bool:
    d = decide("seg", "cand", {"umd": candidate}, "champ", {"umd": champion}, cfg.gate, gate_policies(cfg))
    return d.verdict == "pass"


def coverage(reps: int, cfg: EvalConfig, seed: int) -> list[tuple[str, float, str, bool]]:
    rows = []
    for n in (6, 12, 30, 100):
        for icc in (0.0, 0.3, 0.7):
            rng = np.random.default_rng([seed, n, int(icc * 10)])
            hit = 0
            for _ in range(reps):
                champion, _ = _pair(rng, n, icc, 0.0)
                s = umd.aggregate(_records(champion), cfg)["umd/dsc"]
                hit += s.ci95_low <= MU.mean() <= s.ci95_high
            target = 0.90 if n < 12 else 0.93
            rows.append(
                (
                    f"umd/dsc 95% CI coverage, {n} subjects, ICC {icc}",
                    hit / reps,
                    f">= {target:.0%}",
                    hit / reps >= target,
                )
            )
    return rows


def gate_rates(reps: int, cfg: EvalConfig, seed: int) -> list[tuple[str, float, str, bool]]:
    rows = []
    settings = [(n, icc, -MARGIN, "type I (pass at delta = -margin)") for n in (6, 12, 30, 100) for icc in (0.0, 0.7)]
    settings += [(n, 0.3, 0.0, "false refusal (refuse at delta = 0)") for n in (6, 20, 50, 200)]
    settings += [(n, 0.3, 0.01, "power (pass at delta = +0.01)") for n in (6, 20, 50, 200)]
    for n, icc, delta, what in settings:
        rng = np.random.default_rng([seed, n, int(icc * 10), int(round(delta * 1000)) + 100])
        passed = 0
        for _ in range(reps):
            a, b = _pair(rng, n, icc, delta)
            passed += _gate(_result(_records(a), cfg, "champ"), _result(_records(b), cfg, "cand"), cfg)
        rate = passed / reps
        label = f"gate {what}, {n} subjects, ICC {icc}"
        if delta < 0:
            target = 0.05 if n < 12 else 0.03
            rows.append((label, rate, f"<= {target:.0%}", rate <= target))
        elif delta == 0:
            rows.append((label, 1 - rate, "reported", True))
        else:
            rows.append((label, rate, "reported", True))
    return rows


def scenarios(cfg: EvalConfig, seed: int) -> list[tuple[str, float, str, bool]]:
    rng = np.random.default_rng(seed)
    champion, _ = _pair(rng, 10, 0.3, 0.0)
    # a fourth organ the truth lacks: not applicable (NaN) for the champion, Dice 0 where the candidate paints it
    wide = cfg.model_copy(update={"umd": cfg.umd.model_copy(update={"labels": {**cfg.umd.labels, "brain": 7}})})
    organs = (*ORGANS, "brain")
    base = np.concatenate([champion, np.full((10, 2, 1), np.nan)], axis=2)
    painted = np.concatenate([champion, np.zeros((10, 2, 1))], axis=2)
    refused_h = not _gate(
        _result(_records(base, organs=organs), wide, "v1"), _result(_records(painted, organs=organs), wide, "v2"), wide
    )
    excl = cfg.model_copy(update={"umd": cfg.umd.model_copy(update={"missing_prediction": "exclude"})})
    refused_m = not _gate(
        _result(_records(champion), excl, "v1"), _result(_records(champion, missing=4), excl, "v2"), excl
    )
    return [
        ("hallucinated organ (Dice 0 where the champion has n/a) refused", float(refused_h), "1 (refused)", refused_h),
        ("4 of 20 predictions missing under exclude refused", float(refused_m), "1 (refused)", refused_m),
    ]


def delong_coverage(reps: int, seed: int) -> list[tuple[str, float, str, bool]]:
    """Coverage of the AUROC CI that ``xray/cls`` reports (DeLong variance, logit scale), by the binormal
    simulation of ``bench_auroc_coverage.py`` (the product's ``delong(...).ci`` on every replication)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_auroc_coverage import NEGATIVES_PER_POSITIVE, SETTINGS, TARGET, coverage

    rows = []
    for auc, m in SETTINGS:
        cov, _ = coverage(auc, m, reps, seed)
        rows.append(
            (
                f"xray/cls/auroc CI coverage, AUROC {auc}, {m} positives / {NEGATIVES_PER_POSITIVE * m} negatives",
                cov,
                f">= {TARGET:.0%}",
                cov >= TARGET,
            )
        )
    return rows


# ------------------------------------------------------------------ X-ray cls, clustered

XRAY_MARGIN = 0.01
XRAY_PREVALENCE = 0.2
SIG_PATIENT, SIG_STUDY = 0.6, 0.8  # a score's patient effect and study noise (latent scale)


def _xray_cohort(rng: np.random.Generator, positives: int) -> tuple[np.ndarray, np.ndarray]:
    """``positives / prevalence`` studies of patients with 1-6 studies each; labels drawn with a patient
    propensity (Beta, mean = prevalence), so a patient's studies share findings: ``(labels, patient code)``."""
    n = round(positives / XRAY_PREVALENCE)
    sizes = rng.integers(1, 7, n)  # more than enough patients; cut at n studies
    codes = np.repeat(np.arange(n), sizes)[:n]
    propensity = rng.beta(XRAY_PREVALENCE * 2.3, (1 - XRAY_PREVALENCE) * 2.3, n)
    return (rng.uniform(size=n) < propensity[codes]).astype(float), codes


def _xray_scores(rng: np.random.Generator, y: np.ndarray, codes: np.ndarray, aucs: tuple[float, float]) -> list:
    """Two models' probabilities on the same studies: a shared patient effect and half of the study noise shared,
    the separation giving each model's population AUROC exactly (``Phi(d / sqrt(2 sigma^2))``)."""
    sigma = math.sqrt(SIG_PATIENT**2 + SIG_STUDY**2)
    u = rng.normal(0, SIG_PATIENT, codes.max() + 1)[codes] + rng.normal(0, SIG_STUDY * math.sqrt(0.5), y.size)
    out = []
    for auc in aucs:
        latent = math.sqrt(2) * sigma * NormalDist().inv_cdf(auc) * y + u + rng.normal(0, SIG_STUDY * 0.5**0.5, y.size)
        out.append(1 / (1 + np.exp(-latent)))
    return out


def _xray_result(folder: str, y: np.ndarray, codes: np.ndarray, scores: np.ndarray, cfg: EvalConfig, version: str):
    """The BenchmarkResult of ``trackeval evaluate xray --task cls`` on MIMIC-CXR-JPG files of these studies."""
    from trackeval.benchmarks import xray
    from trackeval.benchmarks.xray.common import TaskInputs

    os.makedirs(folder, exist_ok=True)
    truth = os.path.join(folder, "mimic-cxr-2.0.0-chexpert.csv")
    pred = os.path.join(folder, f"{version}.csv")
    with open(truth, "w") as f:
        f.write("subject_id,study_id,Edema\n")
        f.writelines(f"{10000000 + c},{50000000 + i},{v:.1f}\n" for i, (c, v) in enumerate(zip(codes, y, strict=True)))
    with open(pred, "w") as f:
        f.write("study_id,Edema\n")
        f.writelines(f"{50000000 + i},{s:.9f}\n" for i, s in enumerate(scores))
    return xray.evaluate("cls", TaskInputs(Path(truth), Path(pred)), cfg, {"name": "cxr", "version": version})


def xray_rates(reps: int, seed: int, auc: float = 0.85) -> list[tuple[str, float, str, bool]]:
    """Headline coverage, gate type I and delta coverage of clustered X-ray cls (module docstring)."""
    # min_positives 2: a cohort drawn for 20 positives holds 6 to 40 (clustered labels); the default 10 would
    # leave the smaller ones without a headline
    cfg = load_config(None, ["bootstrap.n_resamples=20", "xray.cls.min_positives=2"])
    logging.getLogger("trackeval").setLevel(logging.ERROR)
    policies = gate_policies(cfg)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for positives in (20, 50, 200):
            rng = np.random.default_rng([seed, positives, 33])
            cover = passed = delta_cover = done = 0
            while done < reps:
                y, codes = _xray_cohort(rng, positives)
                if y.sum() < 2 or (1 - y).sum() < 2:
                    continue
                base_s, cand_s = _xray_scores(rng, y, codes, (auc, auc - XRAY_MARGIN))
                base = _xray_result(tmp, y, codes, base_s, cfg, "v1")
                cand = _xray_result(tmp, y, codes, cand_s, cfg, "v2")
                head = base.aggregates["xray/cls/auroc"]
                cover += head.ci95_low is not None and head.ci95_low <= auc <= head.ci95_high
                d = decide("cxr", "v2", {"xray/cls": cand}, "v1", {"xray/cls": base}, cfg.gate, policies)
                row = d.comparisons[0].rows[0]
                passed += any(c.name == "non_inferiority" and c.passed for c in d.checks)
                delta_cover += row.ci95_low is not None and row.ci95_low <= -XRAY_MARGIN <= row.ci95_high
                done += 1
            what = f"{positives} positives, patients of 1-6 studies, AUROC {auc}"
            cov_target = 0.925 if positives < 50 else 0.935
            rows.append(
                (
                    f"xray/cls/auroc CI coverage, {what}",
                    cover / reps,
                    f">= {cov_target:.1%}",
                    cover / reps >= cov_target,
                )
            )
            rows.append(
                (
                    f"xray/cls gate type I (pass at delta = -margin), {what}",
                    passed / reps,
                    "<= 3.0%",
                    passed / reps <= 0.03,
                )
            )
            rows.append(
                (f"xray/cls delta CI coverage at delta = -margin, {what}", delta_cover / reps, "reported", True)
            )
    return rows


# ------------------------------------------------------------------ the worst-group guard's family-wise error

GUARD_ORGANS = tuple(f"organ{i:02d}" for i in range(13))
GUARD_MARGIN = 0.05  # the UMD group margin


def guard_fwer(
    reps: int, resamples: int, seed: int, subjects: tuple[int, ...] = (6, 12, 30, 100)
) -> list[tuple[str, float, str, bool]]:
    """P(the guard refuses any group) with every organ (and so both modalities) exactly at ``-group_margin``."""
    labels = "{" + ", ".join(f"{o}: {i + 1}" for i, o in enumerate(GUARD_ORGANS)) + "}"
    cfg = load_config(
        None,
        [
            f"umd.labels={labels}",
            "umd.metrics=[dsc]",
            "umd.modality_pairs=[]",
            "bootstrap.n_resamples=20",
            f"gate.n_resamples={resamples}",
        ],
    )
    policies = gate_policies(cfg)
    mu = np.linspace(0.70, 0.90, len(GUARD_ORGANS))
    rows = []
    for n in subjects:
        rng = np.random.default_rng([seed, n, 15])
        refused = 0
        for _ in range(reps):
            u = rng.normal(0.0, SD * math.sqrt(0.3), (n, 1, 13))
            shared = rng.normal(0.0, SD * math.sqrt(0.35), (n, 2, 13))
            champion = mu + u + shared + rng.normal(0.0, SD * math.sqrt(0.35), (n, 2, 13))
            candidate = mu - GUARD_MARGIN + u + shared + rng.normal(0.0, SD * math.sqrt(0.35), (n, 2, 13))
            a = _result(_records(champion, organs=GUARD_ORGANS), cfg, "champ")
            b = _result(_records(candidate, organs=GUARD_ORGANS), cfg, "cand")
            d = decide("seg", "cand", {"umd": b}, "champ", {"umd": a}, cfg.gate, policies)
            assert len(d.group_tests) == 15
            refused += any(not g.passed for g in d.group_tests)
        rate = refused / reps
        rows.append(
            (f"guard family-wise refusal, 15 groups all at -group margin, {n} subjects", rate, "<= 5%", rate <= 0.05)
        )
    return rows


# ------------------------------------------------------------------ UMD with unequal clusters and missing organs

ZERO_RATE = 0.03


def _ragged(rng: np.random.Generator, n: int, delta: float) -> tuple[list[CaseRecord], list[CaseRecord]]:
    """Champion and candidate records of ``n`` subjects with 1-10 scans each (CT and PET alternating), ICC 0.3,
    each organ absent from 30-70% of the scans (NaN on both sides) and 3% failures (Dice 0) on each side."""
    sizes = rng.integers(1, 11, n)
    absent = rng.uniform(0.3, 0.7, 3)
    sides: list[list[CaseRecord]] = [[], []]
    for s, k in enumerate(sizes):
        u = rng.normal(0.0, SD * math.sqrt(0.3), 3)
        shared = rng.normal(0.0, SD * math.sqrt(0.35), (k, 3))
        gone = rng.uniform(size=(k, 3)) < absent
        for side, shift in enumerate((0.0, delta)):
            dice = MU + shift + u + shared + rng.normal(0.0, SD * math.sqrt(0.35), (k, 3))
            dice = np.where(rng.uniform(size=(k, 3)) < ZERO_RATE, 0.0, dice)
            for m in range(k):
                sides[side].append(
                    CaseRecord(
                        case_id=f"s{s:03d}_{m:02d}",
                        subject_id=f"s{s:03d}",
                        groups={"modality": ("ct", "pet")[m % 2]},
                        metrics={o: ({} if gone[m, j] else {"dsc": float(dice[m, j])}) for j, o in enumerate(ORGANS)},
                    )
                )
    return sides[0], sides[1]


def umd_ragged(reps: int, cfg: EvalConfig, seed: int) -> list[tuple[str, float, str, bool]]:
    """Headline coverage and type I of UMD with subjects of 1-10 scans, missing organs and 3% failures. The
    true headline is ``mean((1 - 0.03) mu)``; the candidate is shifted by ``-margin / 0.97`` so that its true
    headline is exactly ``margin`` lower."""
    truth = float(np.mean((1 - ZERO_RATE) * MU))
    rows = []
    for n in (6, 12, 30):
        rng = np.random.default_rng([seed, n, 110])
        hit = passed = 0
        for _ in range(reps):
            a, b = _ragged(rng, n, -MARGIN / (1 - ZERO_RATE))
            champion, candidate = _result(a, cfg, "champ"), _result(b, cfg, "cand")
            head = champion.aggregates["umd/dsc"]
            hit += head.ci95_low is not None and head.ci95_low <= truth <= head.ci95_high
            d = decide("seg", "cand", {"umd": candidate}, "champ", {"umd": champion}, cfg.gate, gate_policies(cfg))
            passed += any(c.name == "non_inferiority" and c.passed for c in d.checks)
        what = f"{n} subjects of 1-10 scans, organs missing in 30-70% of scans, 3% zeros"
        rows.append((f"umd/dsc CI coverage, {what}", hit / reps, "reported", True))
        rows.append((f"umd gate type I (pass at delta = -margin), {what}", passed / reps, "reported", True))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000, help="replications per setting (default 1000)")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per CI (default 1000)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--quick", action="store_true", help="200 replications: a smoke run, not the published table")
    ap.add_argument("--xray", action="store_true", help="only the clustered X-ray cls rows (>= 2000 replications)")
    ap.add_argument("--guard", action="store_true", help="only the guard's family-wise rows (>= 2000 replications)")
    ap.add_argument("--subjects", default="6,12,30,100", help="the guard's numbers of subjects (default 6,12,30,100)")
    ap.add_argument("--ragged", action="store_true", help="only UMD with subjects of 1-10 scans and missing organs")
    ap.add_argument("--imis", action="store_true", help="only IMIS, subjects of 1-4 images (>= 2000 replications)")
    ap.add_argument("--mir3d", action="store_true", help="only 3D-MIR, query volume clusters (>= 2000 replications)")
    args = ap.parse_args()
    reps = 200 if args.quick else args.reps
    cfg = _config(args.resamples)
    t0 = time.perf_counter()
    units = args.imis or args.mir3d
    if units:  # at least 2000 replications, unless --quick (a smoke run)
        reps = reps if args.quick else max(reps, 2000)
        rows = calibration_units.imis_rates(reps, args.resamples, args.seed) if args.imis else []
        rows += calibration_units.mir3d_rates(reps, args.resamples, args.seed) if args.mir3d else []
    elif args.ragged:
        rows = umd_ragged(reps, cfg, args.seed)
    elif args.xray or args.guard:
        rows = xray_rates(max(reps, 2000), args.seed) if args.xray else []
        subjects = tuple(int(x) for x in args.subjects.split(","))
        rows += guard_fwer(max(reps, 2000), 2000, args.seed, subjects) if args.guard else []
    else:
        rows = coverage(reps, cfg, args.seed) + gate_rates(reps, cfg, args.seed) + scenarios(cfg, args.seed)
        rows += delong_coverage(max(reps, 2000), args.seed)
    width = max(len(r[0]) for r in rows)
    print(f"{'setting':<{width}}  measured  target        met")
    for label, value, target, ok in rows:
        print(f"{label:<{width}}  {value:8.1%}  {target:<12}  {'yes' if ok else 'NO'}")
    if args.xray or args.guard:  # these fix their own counts: >= 2000 replications; the guard's gate B = 2000
        what = f"{max(reps, 2000)} replications per setting, gate resamples 2000 (guard) / DeLong (xray)"
    else:
        gate_b = ", gate resamples 2000" if units else ""
        what = f"{reps} replications per setting, {args.resamples} resamples{gate_b}"
    print(f"{what}, seed {args.seed}, {time.perf_counter() - t0:.0f} s")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
