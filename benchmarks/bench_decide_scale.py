"""The cost of deciding at scale: every decision command as a whole process, against a pandas + sklearn floor.

Usage::

    .venv/bin/python benchmarks/bench_decide_scale.py [--studies 1000 10000] [--seed 38] [--keep DIR]
        [--unit xray|umd] [--cases 954]

To time another checkout with the same script, put its ``src`` first on ``PYTHONPATH`` (every command this script
starts inherits the environment): ``PYTHONPATH=OTHER/src .venv/bin/python benchmarks/bench_decide_scale.py ...``.

Data (generated from ``--seed`` into a temporary folder, or into ``--keep DIR``, which is kept):

* ``--unit xray`` (default): for each ``--studies`` N, MIMIC-CXR-JPG's layout. Patients of 1-4 studies,
  ``mimic-cxr-2.0.0-chexpert.csv`` (``subject_id``, ``study_id``, the 14 CheXpert findings in the release's
  alphabetical order; values ``1.0`` / ``0.0`` / ``-1.0`` / blank with MIMIC-like prevalences, a patient's studies
  sharing findings) and two model versions' per-image score files (``dicom_id,study_id,<14 findings>``, 1-3 images
  per study, about MIMIC's 1.65; the frontal image carries the study's score, the others score lower, so trackeval's
  max pooling gives the study's score). Scores are ``_xray_scores`` of ``bench_gate_calibration.py`` per finding
  (a shared patient effect, population AUROC 0.76-0.90 for v1 and 0.015 more for v2).
* ``--unit umd``: ``--cases`` (default 954, UMD's scan count) reduced-resolution NIfTI cases built by
  ``build_umd`` of ``bench_scale.py``; v2's predictions are v1's except every fourth case, where v2 predicts the
  truth (v2 slightly better).

Timed, one command at a time, each as its own process started from a fresh helper process (this script's
``_run`` mode), so that the peak RSS is the command's own and not the hiwater mark of the process that forked it
(Linux carries the parent's peak into a child's ``ru_maxrss`` on ``exec``): CPU seconds (user + system) of the whole
process tree and the peak RSS of its largest process (``os.wait4`` in ``run_tree`` of ``bench_e2e_umd.py``; the
helper is a child subreaper, so worker processes are counted). A peak at or below the helper's own is printed
as ``<=`` that value. The commands, as a user types them, in a working folder holding the MLflow store (the
default ``sqlite:///mlflow.db`` with artifacts in ``mlartifacts/``, no server):

``evaluate`` v1 and v2 (``trackeval evaluate xray --task cls`` or ``evaluate umd``, ``--no-cache``: every case
computed, as in a first run, although v2 shares most UMD prediction files with v1; the targets use v1's),
``track`` each results folder (registers versions v1 and v2 of one model), ``promote`` v1 (the first version:
floors only) then v2 against v1 as ``@champion`` (timed whatever its verdict), ``compare`` the two results
folders, ``verify`` the model's aliases (reads the decision records promote wrote), and a bare MLflow registry
query (a process that imports ``mlflow`` and asks for ``@champion`` once): the reference of ``verify``.

The floor (xray only), in the same run: one process that reads the labels and both score files with pandas, pools
each study's images by max and computes sklearn's ``roc_auc_score`` for the 14 findings of both versions (blank =
negative, ``-1.0`` left out, as trackeval's defaults). Its AUROCs are checked against trackeval's per-finding
AUROCs in ``metrics.json`` (the largest absolute difference is printed).

Printed: ``command | N | CPU-s | peak RSS MiB | ratio to floor`` per command, the 1-minute load average range,
and ``target met: yes/no`` for issue 38's targets (acceptance at 100,000 studies): evaluate <= 5x the floor and
<= 1 GiB peak RSS, track / promote / compare each <= 5x the floor, verify <= 1.5x the bare query. For UMD there
is no floor; its target is "within 10% of the previous release": run the script on both checkouts and compare.
Nothing is asserted: this is a benchmark. A command that fails stops the run with its standard error's tail.

Only the standard library is imported at module level: the helper and the floor run this file as a script, and
neither may carry the import of numpy, pandas or trackeval into what it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: mimic-cxr-2.0.0-chexpert.csv's 14 findings, in the release's (alphabetical) column order, and a prevalence each
PREVALENCE = {
    "Atelectasis": 0.20, "Cardiomegaly": 0.20, "Consolidation": 0.05, "Edema": 0.12,
    "Enlarged Cardiomediastinum": 0.03, "Fracture": 0.02, "Lung Lesion": 0.03, "Lung Opacity": 0.22,
    "No Finding": 0.33, "Pleural Effusion": 0.24, "Pleural Other": 0.01, "Pneumonia": 0.07, "Pneumothorax": 0.05,
    "Support Devices": 0.29,
}  # fmt: skip
FINDINGS = tuple(PREVALENCE)
AUROC_V1 = (0.76, 0.90)  # v1's population AUROC, spread evenly over the findings
AUROC_GAIN = 0.015  # v2's AUROC over v1's, every finding
UNCERTAIN_RATE = 0.05  # share of label cells written -1.0
EXPLICIT_NEGATIVE = 0.3  # share of negative cells written 0.0 (the rest blank, "not mentioned")
IMAGES_PER_STUDY = ((1, 2, 3), (0.45, 0.45, 0.10))
LABELS_FILE = "mimic-cxr-2.0.0-chexpert.csv"
MODEL = {"xray": "cxr", "umd": "seg"}
VERSIONS = ("v1", "v2")
FLOOR_TARGET, RSS_TARGET_MIB, VERIFY_TARGET = 5.0, 1024.0, 1.5


# ----------------------------------------------------------------------------- data


def _patients(rng: np.random.Generator, n_studies: int) -> np.ndarray:
    """The patient code (0, 1, ...) of each of ``n_studies`` studies, patients holding 1-4 consecutive studies."""
    import numpy as np

    sizes = rng.integers(1, 5, n_studies)
    return np.repeat(np.arange(n_studies), sizes)[:n_studies]


def _labels(rng: np.random.Generator, patients: np.ndarray, prevalence: float) -> tuple[np.ndarray, np.ndarray]:
    """One finding's true labels (0/1) with a per-patient propensity (Beta, mean ``prevalence``), so that a
    patient's studies share findings, and the CSV spelling of each: ``1.0``, ``0.0`` or blank for a negative,
    ``-1.0`` for an uncertain mention (either truth)."""
    import numpy as np

    propensity = rng.beta(prevalence * 2.3, (1 - prevalence) * 2.3, patients.max() + 1)
    y = (rng.uniform(size=patients.size) < propensity[patients]).astype(float)
    spelling = np.where(y == 1, "1.0", np.where(rng.uniform(size=y.size) < EXPLICIT_NEGATIVE, "0.0", ""))
    return y, np.where(rng.uniform(size=y.size) < UNCERTAIN_RATE, "-1.0", spelling)


def _dicom_ids(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` MIMIC-CXR-JPG style image ids (five groups of 8 hex digits)."""
    words = rng.integers(0, 2**32, (n, 5), dtype="uint64")
    return ["-".join(f"{w:08x}" for w in row) for row in words.tolist()]


def build_mimic(root: Path, n_studies: int, seed: int) -> tuple[Path, dict[str, Path]]:
    """Write ``root/mimic-cxr-2.0.0-chexpert.csv`` and ``root/<version>.csv`` per-image scores (module docstring).
    Returns the labels file and the score file of each version."""
    import numpy as np
    import pandas as pd

    from bench_gate_calibration import _xray_scores

    rng = np.random.default_rng([seed, n_studies])
    patients = _patients(rng, n_studies)
    subjects = 10_000_000 + np.sort(rng.choice(9_999_999, patients.max() + 1, replace=False))[patients]
    studies = 50_000_000 + rng.choice(9_999_999, n_studies, replace=False)
    truth = pd.DataFrame({"subject_id": subjects, "study_id": studies})
    scores = {v: pd.DataFrame() for v in VERSIONS}
    for finding, auc in zip(FINDINGS, np.linspace(*AUROC_V1, len(FINDINGS)), strict=True):
        y, truth[finding] = _labels(rng, patients, PREVALENCE[finding])
        for version, s in zip(VERSIONS, _xray_scores(rng, y, patients, (auc, auc + AUROC_GAIN)), strict=True):
            scores[version][finding] = s
    per_study = rng.choice(IMAGES_PER_STUDY[0], n_studies, p=IMAGES_PER_STUDY[1])
    rows = np.repeat(np.arange(n_studies), per_study)
    first = np.r_[True, rows[1:] != rows[:-1]]  # the study's first (frontal) image carries its score
    damp = np.where(first, 1.0, rng.uniform(0.8, 1.0, rows.size))[:, None]
    dicom = _dicom_ids(rng, rows.size)
    root.mkdir(parents=True, exist_ok=True)
    labels = root / LABELS_FILE
    truth.to_csv(labels, index=False)
    files = {}
    for version, table in scores.items():
        images = pd.DataFrame(table.to_numpy()[rows] * damp, columns=list(FINDINGS))
        images.insert(0, "study_id", studies[rows])
        images.insert(0, "dicom_id", dicom)
        files[version] = root / f"{version}.csv"
        images.to_csv(files[version], index=False, float_format="%.6f")
    return labels, files


def build_umd_versions(root: Path, n_cases: int) -> tuple[Path, dict[str, Path]]:
    """``build_umd`` of ``bench_scale.py`` (the truth and v1's predictions), and v2's predictions: v1's files
    linked, every fourth case the truth itself. Returns the truth folder and each version's predictions folder."""
    from bench_scale import build_umd

    gt, pred = build_umd(root, n_cases)
    v2 = root / "pred_v2"
    v2.mkdir()
    for i, path in enumerate(sorted(pred.glob("*.nii.gz"))):
        os.link(gt / path.name if i % 4 == 0 else path, v2 / path.name)
    return gt, {"v1": pred, "v2": v2}


# ----------------------------------------------------------------------------- child processes


def floor(labels: str, *score_files: str) -> dict[str, float]:
    """The floor's work: pandas reads, max pooling per study, sklearn AUROC per finding and score file (keys
    ``<file stem>/<finding>``)."""
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    truth = pd.read_csv(labels, index_col="study_id").drop(columns="subject_id").fillna(0.0)
    out = {}
    for path in score_files:
        pooled = pd.read_csv(path).drop(columns="dicom_id").groupby("study_id").max()
        both = truth.join(pooled, rsuffix=" score", how="inner")
        for finding in FINDINGS:
            known = both[finding] != -1
            out[f"{Path(path).stem}/{finding}"] = roc_auc_score(both[finding][known], both[f"{finding} score"][known])
    return out


def bare_query(model: str) -> str:
    """One MLflow registry query on the working folder's store: the version ``model@champion`` names."""
    import mlflow

    return mlflow.MlflowClient(tracking_uri="sqlite:///mlflow.db").get_model_version_by_alias(model, "champion").version


def run_measured(cmd: list[str]) -> dict:
    """The helper's work: run ``cmd`` (``run_tree`` of ``bench_e2e_umd.py``, which exits with the command's
    standard error on a failure) as a child subreaper; its timing, its standard output and this helper's own
    peak RSS (a child's peak below it cannot be told apart from it)."""
    from bench_e2e_umd import _become_subreaper, run_tree

    _become_subreaper()
    timing, stdout = run_tree(cmd)
    return {"cpu_s": timing.cpu_s, "rss_mib": timing.maxrss_mib, "load": timing.load, "helper_mib": own_peak_mib(),
            "stdout": stdout}  # fmt: skip


def own_peak_mib() -> float:
    """This process's own peak RSS in MiB: ``VmHWM`` of ``/proc/self/status``, the peak of its own address space
    (``ru_maxrss`` would also carry the peak of the process it was started from, taken over at ``exec``); where
    there is no ``/proc``, ``ru_maxrss``."""
    import resource

    try:
        status = Path("/proc/self/status").read_text(encoding="ascii").splitlines()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return next(float(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:"))


CHILD_MODES = {
    "_floor": lambda argv: json.dumps(floor(*argv)),
    "_query": lambda argv: bare_query(argv[0]),
    "_run": lambda argv: json.dumps(run_measured(argv)),
}


# ----------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Row:
    """One timed command: CPU seconds of its process tree, its largest process's peak RSS (MiB; ``exact`` False
    when at or below the helper's own peak, an upper bound), the 1-minute load average when it ended."""

    command: str
    n: int
    cpu_s: float
    rss_mib: float
    exact: bool
    load: float


def measure(name: str, n: int, cmd: list[str], cwd: Path) -> tuple[Row, str]:
    """Run ``cmd`` in ``cwd`` from a fresh helper process; its :class:`Row` and standard output. Exits with the
    command's standard error tail when it fails."""
    helper = [sys.executable, str(Path(__file__).resolve()), "_run", *cmd]
    proc = subprocess.run(helper, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"{name} (N={n}) failed in {cwd}:\n{proc.stderr[-3000:]}")
    got = json.loads(proc.stdout)
    exact = got["rss_mib"] > got["helper_mib"]
    return Row(name, n, got["cpu_s"], got["rss_mib"], exact, got["load"]), got["stdout"]


def trackeval_cmd(*args: str) -> list[str]:
    """The ``trackeval`` console script of this interpreter's environment with ``args``."""
    script = Path(sys.executable).parent / "trackeval"
    if not script.exists():
        sys.exit(f"no trackeval console script next to {sys.executable}: install the project into this environment")
    return [str(script), *args]


def any_verdict(cmd: list[str]) -> list[str]:
    """``cmd`` through ``sh``, exit 0 when ``cmd`` exits 0 or 1 (promote: pass or fail; 2 stays an error)."""
    return ["sh", "-c", '"$@"; test $? -le 1', "sh", *cmd]


def decide(unit: str, n: int, work: Path, evaluate: dict[str, list[str]]) -> list[Row]:
    """Time evaluate (per version), track, promote, compare, verify and the bare query in ``work``."""
    model = MODEL[unit]
    rows = []
    for version in VERSIONS:
        out = ["--out", f"out/{version}", "--model-name", model, "--model-version", version, "--no-cache"]
        rows.append(measure(f"evaluate {version}", n, trackeval_cmd(*evaluate[version], *out), work)[0])
    for version in VERSIONS:
        rows.append(measure(f"track {version}", n, trackeval_cmd("track", f"out/{version}"), work)[0])
    for version in VERSIONS:
        promote = any_verdict(trackeval_cmd("promote", "--model", model, "--candidate", version))
        rows.append(measure(f"promote {version}", n, promote, work)[0])
    rows.append(measure("compare", n, trackeval_cmd("compare", "out/v2", "out/v1"), work)[0])
    rows.append(measure("verify", n, any_verdict(trackeval_cmd("verify", "--model", model)), work)[0])
    query = [sys.executable, str(Path(__file__).resolve()), "_query", model]
    rows.append(measure("bare MLflow query", n, query, work)[0])
    return rows


def xray_rows(n: int, work: Path, seed: int) -> tuple[list[Row], Row]:
    """Generate N studies, time the floor and the commands; check the floor's AUROCs against trackeval's."""
    labels, scores = build_mimic(work / "data", n, seed)
    floor_cmd = [sys.executable, str(Path(__file__).resolve()), "_floor", str(labels), *map(str, scores.values())]
    floor_row, floor_out = measure("floor (pandas + sklearn)", n, floor_cmd, work)
    evaluate = {
        v: ["evaluate", "xray", "--task", "cls", "--ground-truth", str(labels), "--predictions", str(scores[v])]
        for v in VERSIONS
    }
    rows = decide("xray", n, work, evaluate)
    gap = auroc_gap(work, json.loads(floor_out))
    print(f"N={n:,}: largest |AUROC trackeval - sklearn| over the 14 findings of both versions: {gap:.2e}")
    return rows, floor_row


def auroc_gap(work: Path, reference: dict[str, float]) -> float:
    """The largest difference between trackeval's per-finding AUROCs (each version's ``metrics.json``) and the
    floor's sklearn values."""
    gaps = []
    for key, value in reference.items():
        version, finding = key.split("/", 1)
        metrics = json.loads((work / "out" / version / "metrics.json").read_text(encoding="utf-8"))
        token = finding.lower().replace(" ", "_")
        gaps.append(abs(metrics[f"xray/cls/auroc/by_finding/{token}"] - value))
    return max(gaps)


def umd_rows(n: int, work: Path) -> list[Row]:
    """Generate the UMD cases and time the commands."""
    gt, preds = build_umd_versions(work / "data", n)
    evaluate = {v: ["evaluate", "umd", "--ground-truth", str(gt), "--predictions", str(p)] for v, p in preds.items()}
    return decide("umd", n, work, evaluate)


# ----------------------------------------------------------------------------- report


def table(rows: list[Row], floors: dict[int, Row]) -> str:
    """The markdown table, with the ratio to the floor of the same N where there is one."""
    lines = ["| command | N | CPU-s | peak RSS MiB | ratio to floor |", "| --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        ratio = f"{r.cpu_s / floors[r.n].cpu_s:.2f}x" if r.n in floors else "-"
        rss = f"{r.rss_mib:.0f}" if r.exact else f"<= {r.rss_mib:.0f}"
        lines.append(f"| {r.command} | {r.n:,} | {r.cpu_s:.2f} | {rss} | {ratio} |")
    return "\n".join(lines)


def targets(rows: list[Row], floors: dict[int, Row]) -> list[str]:
    """``target met: yes/no`` lines per N: the floor ratios (xray) and verify against the bare query."""
    out = []
    for n in dict.fromkeys(r.n for r in rows):
        got = {r.command: r for r in rows if r.n == n}
        checks = []
        if n in floors:
            base = floors[n].cpu_s
            ev = got["evaluate v1"]
            checks.append(("evaluate v1 <= 5x floor and <= 1 GiB", ev.cpu_s / base, ev.cpu_s <= FLOOR_TARGET * base
                           and ev.rss_mib <= RSS_TARGET_MIB))  # fmt: skip
            for name in ("track v1", "track v2", "promote v2", "compare"):
                checks.append((f"{name} <= 5x floor", got[name].cpu_s / base, got[name].cpu_s <= FLOOR_TARGET * base))
        query = got["bare MLflow query"].cpu_s
        checks.append(("verify <= 1.5x bare query", got["verify"].cpu_s / query, got["verify"].cpu_s <= 1.5 * query))
        out += [f"N={n:,}: {what}: {ratio:.2f}x, target met: {'yes' if ok else 'no'}" for what, ratio, ok in checks]
    return out


def checkout() -> str:
    """``trackeval VERSION (commit SHA)`` of the package the commands import (``PYTHONPATH`` first); the commit when
    it is imported from a git work tree."""
    import trackeval

    src = Path(trackeval.__file__).resolve().parent
    git = ["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"]
    sha = subprocess.run(git, capture_output=True, text=True, check=False).stdout.strip()
    return f"trackeval {trackeval.__version__}" + (f" (commit {sha})" if sha else "")


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", type=int, nargs="+", default=[1000, 10000], help="xray: studies per run")
    ap.add_argument("--cases", type=int, default=954, help="umd: number of cases")
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--keep", type=Path, help="generate into DIR and keep it (data, results, MLflow store)")
    ap.add_argument("--unit", choices=["xray", "umd"], default="xray")
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    if argv and argv[0] in CHILD_MODES:
        print(CHILD_MODES[argv[0]](argv[1:]))
        return 0
    args = parse(argv)
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # the store is the working folder's sqlite:///mlflow.db
    root = Path(args.keep or tempfile.mkdtemp(prefix="bench-decide-scale-"))
    rows, floors = [], {}
    print(f"{checkout()}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs", flush=True)
    try:
        for n in args.studies if args.unit == "xray" else [args.cases]:
            work = root / f"{args.unit}-{n}"
            if work.exists():
                sys.exit(f"{work} exists: --keep needs an empty folder")
            work.mkdir(parents=True)
            if args.unit == "xray":
                got, floors[n] = xray_rows(n, work, args.seed)
                got.insert(0, floors[n])
            else:
                got = umd_rows(n, work)
            rows += got
            print(f"N={n:,} done, load {min(r.load for r in got):.1f}-{max(r.load for r in got):.1f}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(table(rows, floors))
    print("\n".join(targets(rows, floors)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
