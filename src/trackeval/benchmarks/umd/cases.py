"""UMD's cases: the ground truth's layout (generic ``manifest.csv`` or nnU-Net v2), the manifest rows and the
label-map files of each case paired with its prediction (:func:`read_inputs`), and the split audit of the cases."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trackeval.audit.leakage import AuditFinding, audit_against_training
from trackeval.benchmarks.segmentation import SEG_METRICS
from trackeval.benchmarks.umd import nnunet
from trackeval.benchmarks.umd.config import UMD_ORGANS, UMDConfig
from trackeval.errors import InputError
from trackeval.io.hashing import sha256_files
from trackeval.io.layouts import Layout, choose
from trackeval.io.paths import check_case_id, resolve_inside
from trackeval.io.tables import read_csv_rows
from trackeval.results import check_group_columns, sha256_text

#: the modalities a manifest row may name
MODALITIES = ("ct", "mri", "pet")
SUFFIX = ".nii.gz"
#: the label-map file names read for a case: ``<case_id>`` + one of these (both present is an error)
SUFFIXES = (SUFFIX, ".nii")

#: the nnU-Net v2 raw dataset layout (:mod:`trackeval.benchmarks.umd.nnunet`)
NNUNET = Layout(
    "nnunet",
    "an nnU-Net v2 dataset folder: dataset.json with labelsTs/ or labelsTr/, or that labels folder",
    nnunet.looks_like,
)
#: UMD's own layout: manifest.csv + <case_id>.nii.gz
GENERIC = Layout(
    "generic", "a folder with manifest.csv and <case_id>.nii.gz", lambda p: (p / "manifest.csv").is_file(), generic=True
)
#: the layouts a ground-truth folder is told from, first match wins (a manifest.csv beside dataset.json is nnU-Net's)
LAYOUTS = (NNUNET, GENERIC)


@dataclass(frozen=True)
class UMDCase:
    """One manifest row with its resolved files (``pred_path`` None when the prediction is missing)."""

    case_id: str
    subject_id: str
    modality: str
    groups: dict[str, str]
    truth_path: Path
    pred_path: Path | None
    image_path: Path | None = None


@dataclass(frozen=True)
class UMDData:
    """What the ground-truth and predictions folders hold, read in the ground truth's layout.

    ``index``: the truth-index lines of the ground-truth digest (``manifest:<sha256>``...); ``suffixes``: the
    label-map file endings read; ``labels``: the organ label map the files declare (nnU-Net's dataset.json; None:
    ``umd.labels``); ``dataset_labels``: every foreground label of dataset.json (None in the generic layout);
    ``notes``: the layout's warning lines; ``labels_file``: the file ``labels`` come from; ``ignore_label``:
    dataset.json's ``ignore`` id (None: every voxel is scored; always None in the generic layout).
    """

    cases: list[UMDCase]
    extra: list[str]
    index: tuple[str, ...]
    layout: Layout
    predictions_format: str
    suffixes: tuple[str, ...] = SUFFIXES
    labels: dict[str, int | tuple[int, ...]] | None = None
    dataset_labels: dict[str, int | tuple[int, ...]] | None = None
    notes: tuple[str, ...] = ()
    labels_file: str = ""
    ignore_label: int | None = None

    @property
    def formats(self) -> dict[str, str]:
        """``config.format`` of results.json."""
        return {"ground_truth": self.layout.name, "predictions": self.predictions_format}


@dataclass(frozen=True)
class _Row:
    """One manifest row, validated."""

    case_id: str
    subject_id: str
    modality: str
    groups: dict[str, str]
    image: str


def _case_file(folder: Path, case_id: str, role: str, suffixes: tuple[str, ...] = SUFFIXES) -> Path | None:
    """``folder/<case_id><suffix>`` for the one of ``suffixes`` that exists (None: none).

    Raises :class:`InputError` when two exist (naming both: which one is the prediction is not a guess to
    make), or when the name exists but is not a regular file (a folder or FIFO is never "no file").
    """
    found = [resolve_inside(folder, case_id + s, case_id=case_id) for s in suffixes]
    found = [p for p in found if p.exists()]
    if len(found) > 1:
        raise InputError(
            f"two label maps for one case: {found[0].name} and {found[1].name} (keep one)",
            file=str(found[0]),
            case_id=case_id,
        )
    if found and not found[0].is_file():
        raise InputError(f"the {role} is not a regular file", file=str(found[0]), case_id=case_id)
    return found[0] if found else None


def _manifest_rows(manifest: Path) -> list[_Row]:
    """The validated rows of a manifest (``case_id, subject_id, modality`` + optional ``image`` and groups).

    Raises :class:`InputError` for a missing/empty manifest, a missing column, an unknown modality, an empty
    subject, duplicate or unsafe case ids, or a group column that collides with an output column.
    """
    rows = read_csv_rows(manifest, required=("case_id", "subject_id", "modality"))
    out: list[_Row] = []
    seen: set[str] = set()
    for line, row in enumerate(rows, start=2):
        case_id = check_case_id(row["case_id"], file=str(manifest))
        if case_id in seen:
            raise InputError(f"duplicate case id on line {line}", file=str(manifest), case_id=case_id, field="case_id")
        seen.add(case_id)
        if not row["subject_id"]:
            raise InputError("empty subject_id", file=str(manifest), case_id=case_id, field="subject_id")
        modality = row["modality"].lower()
        if modality not in MODALITIES:
            raise InputError(
                f"unknown modality {row['modality']!r}; expected one of {list(MODALITIES)}",
                file=str(manifest),
                case_id=case_id,
                field="modality",
            )
        groups = {k: v for k, v in row.items() if k not in ("case_id", "subject_id", "modality", "image") and v}
        check_group_columns(groups, item_kind="organ", metrics=SEG_METRICS, file=str(manifest), case_id=case_id)
        out.append(_Row(case_id, row["subject_id"], modality, groups, row.get("image") or ""))
    return out


def _case(row: _Row, root: Path, truth: Path, pred: Path | None) -> UMDCase:
    image = resolve_inside(root, row.image, case_id=row.case_id) if row.image else None
    return UMDCase(
        row.case_id, row.subject_id, row.modality, {"modality": row.modality, **row.groups}, truth, pred, image
    )


def _extra_predictions(pred_dir: Path, case_ids: set[str], suffixes: tuple[str, ...]) -> list[str]:
    """Label-map file names of ``pred_dir`` that match no case."""
    return sorted(p.name for p in pred_dir.iterdir() if _label_map_id(p.name, suffixes) not in (None, *case_ids))


def _read_generic(gt_dir: Path, pred_dir: Path) -> UMDData:
    """The generic layout: ``manifest.csv`` + ``<case_id>.nii.gz`` (:mod:`trackeval.benchmarks.umd`)."""
    manifest = gt_dir / "manifest.csv"
    cases = []
    for row in _manifest_rows(manifest):
        truth = _case_file(gt_dir, row.case_id, "ground-truth label map")
        if truth is None:
            raise InputError(
                "ground-truth label map not found", file=str(gt_dir / (row.case_id + SUFFIX)), case_id=row.case_id
            )
        pred = _case_file(pred_dir, row.case_id, "prediction")  # a folder or FIFO is not "no prediction": an error
        cases.append(_case(row, gt_dir, truth, pred))
    extra = _extra_predictions(pred_dir, {c.case_id for c in cases}, SUFFIXES)
    return UMDData(cases, extra, (f"manifest:{sha256_files(manifest)}",), GENERIC, _predictions_format(pred_dir))


def _predictions_format(pred_dir: Path) -> str:
    return "nnunet" if nnunet.written_by_nnunet(pred_dir) else "generic"


def _nnunet_rows(ds: nnunet.NnunetDataset, case_ids: list[str]) -> tuple[list[_Row], list[str], list[str]]:
    """The rows of the nnU-Net cases (from ``manifest.csv`` beside dataset.json, else each case its own subject
    with the modality of ``channel_names``), the truth-index lines it adds and its warning lines.

    Raises:
        InputError: a manifest row without a label map, or a label map without a manifest row.
    """
    manifest = ds.root / "manifest.csv"
    if not manifest.is_file():
        modality = ds.modality or "unknown"
        notes = []
        if ds.modality is None:
            notes.append(
                f"modality unknown: dataset.json channel_names {sorted(ds.channel_names.values())} name no single "
                f"modality of {list(MODALITIES)} and there is no manifest.csv beside it: no by-modality breakdown "
                "and no paired PET vs CT/MRI gap (add manifest.csv: case_id,subject_id,modality)"
            )
        return [_Row(c, c, modality, {}, "") for c in case_ids], [], notes
    rows = {r.case_id: r for r in _manifest_rows(manifest)}
    for case_id in case_ids:
        if case_id not in rows:
            raise InputError(
                "no manifest.csv row for this label map", file=str(manifest), case_id=case_id, field="case_id"
            )
    unmatched = sorted(rows.keys() - set(case_ids))
    if unmatched:
        file = str(ds.labels_dir / (unmatched[0] + ds.file_ending))
        raise InputError("ground-truth label map not found", file=file, case_id=unmatched[0])
    return [rows[c] for c in case_ids], [f"manifest:{sha256_files(manifest)}"], []


def _read_nnunet(gt_dir: Path, pred_dir: Path) -> UMDData:
    """The nnU-Net v2 raw layout (:mod:`trackeval.benchmarks.umd.nnunet`)."""
    ds = nnunet.read_dataset(gt_dir)
    files = dict(nnunet.label_files(ds))
    rows, index, notes = _nnunet_rows(ds, list(files))
    suffixes = (ds.file_ending,)
    cases = [_case(r, ds.root, files[r.case_id], _case_file(pred_dir, r.case_id, "prediction", suffixes)) for r in rows]
    labels, unmatched = nnunet.organ_labels(ds, UMD_ORGANS)
    if unmatched:
        notes.append(
            f"{len(unmatched)} dataset.json label(s) name no UMD organ and are scored as background "
            f"(umd.labels maps them): {', '.join(unmatched[:10])}"
        )
    if ds.labels_dir.name != nnunet.LABEL_FOLDERS[0]:
        notes.append(f"scoring {ds.labels_dir.name}/ (no {nnunet.LABEL_FOLDERS[0]}/ folder)")
    extra = _extra_predictions(pred_dir, set(files), suffixes)
    return UMDData(
        cases,
        extra,
        (f"dataset:{ds.digest}", *index),
        NNUNET,
        _predictions_format(pred_dir),
        suffixes,
        labels,
        ds.labels,
        tuple(notes),
        str(ds.path),
        ds.ignore,
    )


def read_inputs(gt_dir: Path, pred_dir: Path, forced: str | None = None) -> UMDData:
    """Validate the folders and read the cases in the ground truth's layout (``forced``: ``--format``).

    A missing prediction is not an error here (the case gets status ``missing_prediction``; :func:`evaluate`
    applies the policy); a prediction without a case is a warning.

    Raises:
        InputError: a folder not found, a ground truth of no layout (naming the layouts tried), or what the
            layout's reader refuses (see :func:`_manifest_rows`, :func:`_case_file`,
            :func:`trackeval.benchmarks.umd.nnunet.read_dataset`).
    """
    if not gt_dir.is_dir():
        raise InputError("ground-truth folder not found", file=str(gt_dir))
    if not pred_dir.is_dir():
        raise InputError("predictions folder not found", file=str(pred_dir))
    layout = choose(gt_dir, LAYOUTS, forced)
    return _read_nnunet(gt_dir, pred_dir) if layout is NNUNET else _read_generic(gt_dir, pred_dir)


def load_cases(gt_dir: Path, pred_dir: Path, forced: str | None = None) -> tuple[list[UMDCase], list[str], str]:
    """Cases, extra prediction file names and the ground truth's index digest (:func:`read_inputs`)."""
    data = read_inputs(gt_dir, pred_dir, forced)
    return data.cases, data.extra, sha256_text(*data.index)


def _label_map_id(name: str, suffixes: tuple[str, ...] = SUFFIXES) -> str | None:
    """The case id of a label-map file name (one of ``suffixes``), None for any other name."""
    return next((name[: -len(s)] for s in suffixes if name.endswith(s)), None)


def audit_cases(cases: list[UMDCase], cfg: UMDConfig) -> list[AuditFinding]:
    """Split audits against ``cfg.train_manifest`` (none configured: no audit)."""
    if cfg.train_manifest is None:
        return []
    images = {c.case_id: c.image_path for c in cases if c.image_path is not None}
    return audit_against_training(Path(cfg.train_manifest), [c.subject_id for c in cases], images)
