"""``cls`` ground-truth and prediction layouts: the datasets' label files as they are distributed.

Ground truth (told from the file, ``--format NAME`` forces one; :func:`read_truth`):

* ``generic``: trackeval's own ``image_id,<finding>...`` CSV (1 / 0, blank or -1 uncertain), one row per image.
* ``chexpert``: CheXpert's ``train.csv`` / ``valid.csv`` (``Path`` of one image per row, then ``Sex``, ``Age``,
  ``Frontal/Lateral``, ``AP/PA`` metadata and 14 findings) or the test set's ``groundtruth.csv`` and the labeler
  outputs (``Study`` per row). Labels are per study: ``Path`` rows are collapsed to their study (the folder of
  the image), whose rows must agree. Values ``1.0`` / ``0.0`` / ``-1.0`` / blank (``1`` / ``0`` in
  ``groundtruth.csv``); blank = not mentioned = negative, ``-1`` = uncertain. Groups (``Path`` files only):
  ``sex``, ``view`` (the study's ``Frontal/Lateral`` values), ``projection`` (its ``AP/PA`` values); the cluster
  of the bootstrap is the patient (``patientNNNNN``).
* ``mimic-cxr``: MIMIC-CXR-JPG's ``mimic-cxr-2.0.0-chexpert.csv`` (``subject_id``, ``study_id``, 14 findings;
  CheXpert semantics); one row per study, ``subject_id`` is the cluster.
* ``nih``: ChestX-ray14's ``Data_Entry_2017.csv`` (``Image Index``, ``Finding Labels`` joined by ``|``, ``No
  Finding`` for none, ``Patient ID`` = cluster, ``Patient Gender`` / ``View Position`` as groups ``sex`` /
  ``projection``); the 14 findings are 1 where named, else 0. A ``test_list.txt`` next to it (the official test
  split, one image name per line) restricts the truth to those images.
* ``mura``: MURA's header-less ``*_labeled_studies.csv`` (``MURA-v1.1/valid/XR_WRIST/patient11185/
  study1_positive/,1``): one study per row, finding ``abnormal``, group ``body_part``, cluster = patient.

Predictions (told from their own file, :func:`read_scores`): a CSV keyed by ``image_id``, ``Study``, ``Path``,
``study_id`` (MIMIC, optionally with ``dicom_id`` per image) or ``Image Index`` with one column per finding, or
MURA's header-less ``path,probability`` rows (images or studies). Every id is matched to the truth by the
layout's key (:attr:`ClsTruth.key_of`: CheXpert ``patient/study``, MURA ``body part/patient/study``, MIMIC the study
number, NIH the image file name), so per-image rows of one study are pooled
(:func:`~trackeval.benchmarks.xray.cls_align.align_scores`).

Label and score tables are read row by row (:func:`trackeval.io.tables.read_csv_columns`): what is kept per row
is its ids (and a patient / group value shared between rows) and its labels or scores in one float array, so a
100,000-study file costs its arrays, not a Python string per cell. A refused cell (a label that is not 1 / 0 / -1
/ blank, a score that is no probability) is noted while reading and raised after the checks of the ids, as a
whole-table read would: the first in file order, naming its line, case and finding.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trackeval.errors import InputError
from trackeval.io.files import decode_text
from trackeval.io.layouts import Layout, choose
from trackeval.io.structured import read_limited
from trackeval.io.tables import Columns, parse_csv, read_csv_columns, stream_csv_rows
from trackeval.results import key_token

#: coded label values before the blank / uncertain policies: 1 positive, 0 negative
UNCERTAIN, BLANK = -1.0, -2.0
_CODES = {"1": 1.0, "1.0": 1.0, "0": 0.0, "0.0": 0.0, "-1": UNCERTAIN, "-1.0": UNCERTAIN, "": BLANK}

CHEXPERT_METADATA = ("Sex", "Age", "Frontal/Lateral", "AP/PA")
MIMIC_IDS = ("subject_id", "study_id")
NIH_FINDINGS = (
    "Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia", "Pneumothorax",
    "Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening", "Hernia",
)  # fmt: skip
NIH_NONE = "No Finding"
MURA_FINDING = "abnormal"
_IMAGE_SUFFIX = re.compile(r"\.(jpe?g|png|dcm|dicom|tiff?)$", re.IGNORECASE)
_MURA_STUDY = re.compile(r"^study\d+_(positive|negative)$")
_MIMIC_STUDY = re.compile(r"^s?(\d+)$")
#: id columns of prediction files, in the order they are looked for
_SCORE_KEYS = ("image_id", "Study", "Path", "study_id", "Image Index")
#: columns of prediction files that are neither the key nor a finding
_SCORE_EXTRA = ("dicom_id", "subject_id", *CHEXPERT_METADATA)
#: CheXpert's group columns: (group, column)
_CHEXPERT_GROUPS = (("sex", "Sex"), ("view", "Frontal/Lateral"), ("projection", "AP/PA"))
#: NIH's group columns: (group, column)
_NIH_GROUPS = (("sex", "Patient Gender"), ("projection", "View Position"))


@dataclass(frozen=True)
class ClsTruth:
    """One split's labels as read in ``layout``.

    ``ids``: the case id of each label row (an image for generic / NIH, a study for the others); ``keys``: what
    prediction and reader ids are matched on (``key_of`` of the id); ``codes``: ``(n_rows, n_findings)`` 1, 0,
    :data:`UNCERTAIN` or :data:`BLANK`; ``blank``: what a blank means in this layout (``negative`` /
    ``uncertain``); ``pool``: the layout's default pooling of per-image scores (None: one row per image, nothing
    to pool); ``files``: the files read, in digest order.
    """

    layout: Layout
    ids: list[str]
    keys: list[str]
    subjects: list[str]
    groups: list[dict[str, str]]
    findings: list[str]
    codes: np.ndarray
    blank: str
    pool: str | None
    files: tuple[Path, ...]
    key_of: Callable[[str], str] = field(repr=False)


@dataclass(frozen=True)
class Scores:
    """A predictions (or reader decisions) file: ``ids`` per row, ``findings`` (columns), ``values`` the
    probabilities ``(n_rows, n_findings)`` (NaN where refused), ``lines`` each row's line in the file (1-based),
    ``refused`` per finding column (its index) with a cell that is no probability in [0, 1], the first one as
    ``(row, text)`` (raised only if that finding is evaluated:
    :func:`~trackeval.benchmarks.xray.cls_align.align_scores`)."""

    layout: str
    file: Path
    ids: list[str]
    findings: list[str]
    values: np.ndarray
    lines: Sequence[int]
    refused: dict[int, tuple[int, str]]
    #: per row, the columns that tell apart rows of one key (MIMIC's ``dicom_id``), "" when none
    variants: list[str] = field(default_factory=list)


def _parts(path_id: str) -> list[str]:
    """The non-empty ``/``-separated components of an id, an image file name at the end left out."""
    parts = [p for p in path_id.replace("\\", "/").split("/") if p]
    if parts and _IMAGE_SUFFIX.search(parts[-1]):
        parts = parts[:-1]
    return parts


def chexpert_key(path_id: str) -> str:
    """``patientNNNNN/studyN`` of a CheXpert ``Path`` or ``Study`` (the release prefix, e.g.
    ``CheXpert-v1.0-small/valid/``, and the image name left out: patients are unique across splits)."""
    return "/".join(_parts(path_id)[-2:])


def mura_key(path_id: str) -> str:
    """``XR_<BODY PART>/patientNNNNN/studyN_<label>`` of a MURA study or image path."""
    return "/".join(_parts(path_id)[-3:])


def mimic_key(study: str) -> str:
    """The study number of a MIMIC-CXR ``study_id`` (``50414267``), ``s50414267`` or a path through it."""
    if study.isdecimal():  # the number itself (what ``\d+`` matches), the file's own spelling
        return study
    for part in reversed(_parts(study)):
        m = _MIMIC_STUDY.match(part)
        if m:
            return m.group(1)
    return study


def nih_key(image: str) -> str:
    """The image file name of a ChestX-ray14 ``Image Index`` (or a path ending in it)."""
    return image.replace("\\", "/").rsplit("/", 1)[-1]


def _identity(x: str) -> str:
    return x


def _image_name(path_id: str) -> str:
    """The image file name an id ends in ("" for a study or case id)."""
    last = path_id.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return last if _IMAGE_SUFFIX.search(last) else ""


def refuse_aliases(
    ids: Sequence[str],
    lines: Sequence[int],
    key_of: Callable[[str], str],
    *,
    file: Path,
    field: str | None = None,
    per_image: bool = False,
    variants: Sequence[str] = (),
    unit: str = "id",
) -> None:
    """Refuse two rows that name one dataset key, however each is spelt (``patient00003/study1`` and
    ``CheXpert-v1.0/test/patient00003/study1``; ``s50414267`` and ``50414267``; ``images/x.png`` and ``x.png``).

    ``key_of`` maps an id to the layout's key. ``per_image``: rows of one key may be its images (a study's views,
    pooled later), told apart by the image file name an id ends in or by ``variants`` (MIMIC's ``dicom_id``);
    then only two rows of one key and one image are duplicates, and so is a row for the whole key (no image)
    beside any other row of that key. ``unit`` names what a key is in the message (``study``, ``image``).

    Raises:
        InputError: naming ``file``, both lines and both spellings.
    """
    seen: dict[tuple[str, str], tuple[str, int]] = {}  # (key, image) -> its first row
    first: dict[str, tuple[str, int]] = {}  # key -> its first row
    whole: dict[str, tuple[str, int]] = {}  # key -> its row naming no image
    for r, (raw, line) in enumerate(zip(ids, lines, strict=True)):
        key = key_of(raw)
        image = f"{_image_name(raw)}\x00{variants[r] if variants else ''}" if per_image else ""
        clash = seen.get((key, image))
        if clash is None and per_image:
            clash = first.get(key) if image == "\x00" else whole.get(key)
        if clash is not None:
            if clash[0] == raw:
                what = f"{unit} {raw!r} on lines {clash[1]} and {line}"
            else:
                what = f"{raw!r} (line {line}) and {clash[0]!r} (line {clash[1]}) name the same {unit} {key!r}"
            raise InputError(
                f"duplicate: {what} (each {unit} may appear once, however it is spelt)",
                file=str(file),
                case_id=raw,
                field=field,
            )
        seen[(key, image)] = (raw, line)
        first.setdefault(key, (raw, line))
        if image == "\x00":
            whole[key] = (raw, line)


def csv_records(path: Path) -> list[tuple[int, list[str]]]:
    """``(line, stripped fields)`` of every non-blank row of a CSV without a header (MURA); a malformed file is
    an :class:`InputError` naming the line."""
    text = decode_text(read_limited(path), file=path)
    out = [(line, [c.strip() for c in row]) for line, row in parse_csv(text, path)]
    if not out:
        raise InputError("no data rows (the file is empty)", file=str(path))
    return out


def _header(path: Path) -> list[str]:
    """The first row of a CSV (stripped fields; ``[""]`` for an empty file), for the layouts' ``matches``."""
    text = decode_text(read_limited(path), file=path)
    first = next(csv.reader(io.StringIO(text.split("\n", 1)[0])), [])
    return [h.strip() for h in first] or [""]


def _is_mura(path: Path) -> bool:
    first = _header(path)
    return len(first) == 2 and bool(_MURA_STUDY.match((_parts(first[0]) or [""])[-1])) and first[1] in {"0", "1"}


def _is_mura_scores(path: Path) -> bool:
    """Header-less ``<path>,<number>`` whose path runs through a MURA study folder (``study1_positive``)."""
    first = _header(path)
    return len(first) == 2 and any(_MURA_STUDY.match(p) for p in _parts(first[0])) and not first[1].isalpha()


GENERIC = Layout("generic", "CSV with an image_id column", lambda p: "image_id" in _header(p), generic=True)
CHEXPERT = Layout("chexpert", "CSV whose first column is Path or Study", lambda p: _header(p)[0] in ("Path", "Study"))
MIMIC = Layout("mimic-cxr", "CSV with subject_id and study_id columns", lambda p: set(MIMIC_IDS) <= set(_header(p)))
NIH = Layout(
    "nih",
    "CSV with Image Index and Finding Labels columns",
    lambda p: {"Image Index", "Finding Labels"} <= set(_header(p)),
)
MURA = Layout("mura", "header-less CSV of MURA study folders and 0/1 labels", _is_mura)
#: the ground-truth layouts, in the order they are tried
TRUTH_LAYOUTS = (GENERIC, CHEXPERT, MIMIC, NIH, MURA)
#: the prediction layouts: a CSV keyed by one of :data:`_SCORE_KEYS`, or MURA's header-less rows
SCORE_LAYOUTS = (
    GENERIC,
    Layout("chexpert", "CSV with a Study or Path column", lambda p: bool({"Study", "Path"} & set(_header(p)))),
    Layout("mimic-cxr", "CSV with a study_id column", lambda p: "study_id" in _header(p)),
    Layout("nih", "CSV with an Image Index column", lambda p: "Image Index" in _header(p)),
    Layout("mura", "header-less CSV of MURA paths and probabilities", _is_mura_scores),
)


def _code_row(cells: list[str]) -> list[float | None]:
    """The coded labels of a row's finding cells (see :data:`UNCERTAIN`, :data:`BLANK`); None for any other
    spelling (:func:`_coded` words the error)."""
    return list(map(_CODES.get, cells))


def _probability(cell: str) -> float | None:
    """A score cell as a probability; None when it is not a number, NaN / infinite, or outside [0, 1]."""
    try:
        x = float(cell)
    except ValueError:
        return None
    return x if 0.0 <= x <= 1.0 else None


def _score_row(cells: list[str]) -> Sequence[float | None]:
    """The probabilities of a row's (one or more) score cells, None where :func:`_probability` refuses one; a
    row of fine cells takes one pass in C (a NaN makes the sum NaN, an infinity fails the min / max test)."""
    try:
        xs = list(map(float, cells))
    except ValueError:
        return [_probability(c) for c in cells]
    total = sum(xs)
    if total == total and min(xs) >= 0.0 and max(xs) <= 1.0:
        return xs
    return [x if 0.0 <= x <= 1.0 else None for x in xs]


def _ids(table: Columns, column: str, path: Path, *, also: tuple[str, ...] = ()) -> list[str]:
    """The ``column`` value of each row; an empty one, or a repeated row (``column`` and the ``also`` columns,
    e.g. ``dicom_id`` of per-image MIMIC predictions), names its lines."""
    ids = table.text[column]
    seen: dict[tuple[str, ...], int] = {}
    for r, (value, line) in enumerate(zip(ids, table.lines, strict=True)):
        if not value:
            raise InputError(f"empty {column} on line {line}", file=str(path), field=column)
        ident = (value, *(table.text[c][r] for c in also))
        if ident in seen:
            raise InputError(
                f"duplicate {column} on lines {seen[ident]} and {line}", file=str(path), case_id=value, field=column
            )
        seen[ident] = line
    return ids


def _coded(table: Columns, findings: list[str], ids: list[str], path: Path) -> np.ndarray:
    """The coded labels ``(n_rows, n_findings)`` of a table read with :func:`_code_row`; its first refused cell
    (file order: row, then column) is an error naming the line, the case and the finding."""
    if table.refused:
        c = min(table.refused, key=lambda k: (table.refused[k][0], k))
        r, value = table.refused[c]
        raise InputError(
            f"label {value!r} on line {table.lines[r]} is not 1, 0, -1 or blank",
            file=str(path),
            case_id=ids[r],
            field=findings[c],
        )
    return table.values


def _read_generic(path: Path) -> ClsTruth:
    header, rows = stream_csv_rows(path, ("image_id",))
    findings = [c for c in header if c != "image_id"]
    if not findings:
        raise InputError("no finding columns besides image_id", file=str(path), field="header")
    table = read_csv_columns(header, rows, ("image_id",), findings, _code_row)
    ids = _ids(table, "image_id", path)
    groups: list[dict[str, str]] = [{} for _ in ids]
    codes = _coded(table, findings, ids, path)
    return ClsTruth(GENERIC, ids, ids, ids, groups, findings, codes, "uncertain", None, (path,), _identity)


def _chexpert_groups(text: dict[str, list[str]], rows: list[int]) -> dict[str, str]:
    """``sex``, ``view`` and ``projection`` of the image ``rows`` of one study (``text``: the group columns the
    file has; ``view`` / ``projection``: the study's distinct ``Frontal/Lateral`` / ``AP/PA`` values, sorted,
    joined by ``_``: ``frontal_lateral``); a column the file lacks, or a blank value, gives no group."""
    out: dict[str, str] = {}
    for group, column in _CHEXPERT_GROUPS:
        values = sorted({key_token(text[column][r], fallback="") for r in rows if column in text} - {""})
        if values and (group != "sex" or len(values) == 1):
            out[group] = "_".join(values)
    return out


def _read_chexpert(path: Path) -> ClsTruth:
    """CheXpert (see the module docstring): ``Path`` rows collapse to their study, whose labels must agree."""
    header, rows = stream_csv_rows(path, ())
    column = header[0]
    findings = [c for c in header if c != column and c not in CHEXPERT_METADATA]
    if column not in ("Path", "Study") or not findings:
        raise InputError(f"expected a Path or Study column and finding columns; found {header}", file=str(path))
    meta = [c for _, c in _CHEXPERT_GROUPS if c in header]
    table = read_csv_columns(header, rows, (column, *meta), findings, _code_row, shared=meta)
    ids = _ids(table, column, path)
    per_image = column == "Path"
    refuse_aliases(ids, table.lines, chexpert_key, file=path, field=column, per_image=per_image, unit="study")
    codes = _coded(table, findings, ids, path)
    members: dict[str, list[int]] = {}
    for r, i in enumerate(ids):
        members.setdefault(chexpert_key(i), []).append(r)
    keys, study_ids, subjects, groups = [], [], [], []
    for key, rs in members.items():
        for r in rs[1:]:
            if not np.array_equal(codes[r], codes[rs[0]]):
                raise InputError(
                    f"the labels of study {key!r} differ between lines {table.lines[rs[0]]} and {table.lines[r]} "
                    "(labels are per study)",
                    file=str(path),
                    case_id=ids[r],
                )
        keys.append(key)
        study_ids.append("/".join(_parts(ids[rs[0]])))
        subjects.append(key.split("/")[0])
        groups.append(_chexpert_groups(table.text, rs))
    codes = codes[[rs[0] for rs in members.values()]]
    return ClsTruth(
        CHEXPERT, study_ids, keys, subjects, groups, findings, codes, "negative", "max", (path,), chexpert_key
    )


def _read_mimic(path: Path) -> ClsTruth:
    header, rows = stream_csv_rows(path, MIMIC_IDS)
    findings = [c for c in header if c not in MIMIC_IDS]
    if not findings:
        raise InputError("no finding columns besides subject_id and study_id", file=str(path), field="header")
    table = read_csv_columns(header, rows, MIMIC_IDS, findings, _code_row, shared=("subject_id",))
    ids = _ids(table, "study_id", path)
    refuse_aliases(ids, table.lines, mimic_key, file=path, field="study_id", unit="study")
    subjects = table.text["subject_id"]
    groups: list[dict[str, str]] = [{} for _ in ids]
    codes = _coded(table, findings, ids, path)
    keys = [mimic_key(i) for i in ids]
    return ClsTruth(MIMIC, ids, keys, subjects, groups, findings, codes, "negative", "max", (path,), mimic_key)


def _test_list(path: Path) -> tuple[Path | None, list[tuple[int, str]]]:
    """The sibling ``test_list.txt`` of a ``Data_Entry_2017.csv`` and its ``(line, image name)`` entries (none:
    ``None, []``); an image listed twice, however spelt, names the list file and both lines."""
    listed = path.with_name("test_list.txt")
    if not listed.is_file():
        return None, []
    text = decode_text(read_limited(listed), file=listed)
    names = [(i, n.strip()) for i, n in enumerate(text.split("\n"), start=1) if n.strip()]
    refuse_aliases([n for _, n in names], [i for i, _ in names], nih_key, file=listed, unit="image")
    return listed, names


def _nih_codes(labels: str, *, path: Path, case: str, line: int) -> list[float]:
    """The 14 NIH findings of one ``Finding Labels`` value: 1 where named, else 0."""
    named = {x.strip() for x in labels.split("|")}
    unknown = sorted(named - set(NIH_FINDINGS) - {NIH_NONE})
    if unknown:
        raise InputError(
            f"finding {unknown[0]!r} on line {line} is none of {[*NIH_FINDINGS, NIH_NONE]}",
            file=str(path),
            case_id=case,
            field="Finding Labels",
        )
    return [float(f in named) for f in NIH_FINDINGS]


def _nih_keep(path: Path, ids: list[str]) -> tuple[Path | None, list[int]]:
    """The sibling ``test_list.txt`` (or None) and the rows of the images it lists (every row without one); a
    listed image missing from ``Data_Entry_2017.csv`` names the list file."""
    listed, names = _test_list(path)
    if listed is None:
        return None, list(range(len(ids)))
    row_of = {nih_key(i): r for r, i in enumerate(ids)}
    absent = [(line, n) for line, n in names if nih_key(n) not in row_of]
    if absent:
        line, name = absent[0]
        raise InputError(
            f"{len(absent)} listed image(s) not in {path.name}, e.g. {name!r} on line {line}",
            file=str(listed),
            case_id=name,
            field=f"line {line}",
        )
    return listed, [row_of[nih_key(n)] for _, n in names]


def _nih_groups(text: dict[str, list[str]], r: int) -> dict[str, str]:
    """``sex`` (``Patient Gender``) and ``projection`` (``View Position``) of row ``r`` (``text``: the columns
    the file has), blanks left out."""
    found = {g: key_token(text[c][r] if c in text else "", fallback="") for g, c in _NIH_GROUPS}
    return {g: v for g, v in found.items() if v}


def _nih_kept_codes(table: Columns, ids: list[str], keep: list[int], path: Path) -> np.ndarray:
    """The 14 coded findings ``(len(keep), 14)`` of the kept rows, in ``keep`` order (:func:`_nih_codes`, once
    per distinct ``Finding Labels`` value: the first kept row of a bad value names it)."""
    labels, known = table.text["Finding Labels"], {}
    out = np.empty((len(keep), len(NIH_FINDINGS)))
    for k, r in enumerate(keep):
        if labels[r] not in known:
            known[labels[r]] = _nih_codes(labels[r], path=path, case=ids[r], line=table.lines[r])
        out[k] = known[labels[r]]
    return out


def _read_nih(path: Path) -> ClsTruth:
    """ChestX-ray14 (see the module docstring), restricted to the sibling ``test_list.txt`` when there is one."""
    header, rows = stream_csv_rows(path, ("Image Index", "Finding Labels", "Patient ID"))
    shared = ["Finding Labels", "Patient ID", *(c for _, c in _NIH_GROUPS if c in header)]
    # no value columns: the 14 findings are coded from the kept rows' Finding Labels (_nih_kept_codes)
    table = read_csv_columns(header, rows, ("Image Index", *shared), (), _code_row, shared=shared)
    ids = _ids(table, "Image Index", path)
    refuse_aliases(ids, table.lines, nih_key, file=path, field="Image Index", unit="image")
    listed, keep = _nih_keep(path, ids)
    codes = _nih_kept_codes(table, ids, keep, path)
    kept = [ids[r] for r in keep]
    return ClsTruth(
        NIH,
        kept,
        [nih_key(i) for i in kept],
        [table.text["Patient ID"][r] for r in keep],
        [_nih_groups(table.text, r) for r in keep],
        list(NIH_FINDINGS),
        codes,
        "negative",
        None,
        (path,) if listed is None else (path, listed),
        nih_key,
    )


def _read_mura(path: Path) -> ClsTruth:
    """MURA's header-less study CSV: ``<study folder>/,<0|1>`` per row."""
    ids, codes, subjects, groups, seen = [], [], [], [], {}
    for line, fields in csv_records(path):
        parts = _parts(fields[0])
        if len(fields) != 2 or len(parts) < 3 or not _MURA_STUDY.match(parts[-1]) or fields[1] not in ("0", "1"):
            raise InputError(
                f"line {line} is not '<MURA study folder>/,<0 or 1>': {fields}", file=str(path), field=f"line {line}"
            )
        key = mura_key(fields[0])
        if key in seen:
            raise InputError(f"study {key!r} on lines {seen[key]} and {line}", file=str(path), case_id=fields[0])
        seen[key] = line
        ids.append(fields[0])
        codes.append([float(fields[1])])
        subjects.append(parts[-2])
        groups.append({"body_part": key_token(parts[-3], fallback="")})
    keys = list(seen)
    return ClsTruth(
        MURA, ids, keys, subjects, groups, [MURA_FINDING], np.array(codes), "negative", "mean", (path,), mura_key
    )


_READERS: dict[str, Callable[[Path], ClsTruth]] = {
    "generic": _read_generic,
    "chexpert": _read_chexpert,
    "mimic-cxr": _read_mimic,
    "nih": _read_nih,
    "mura": _read_mura,
}


def read_truth(path: Path, forced: str | None = None) -> ClsTruth:
    """The labels of ``path`` in its layout (``forced``: the ``--format`` name); see the module docstring."""
    return _READERS[choose(path, TRUTH_LAYOUTS, forced).name](path)


def read_in_layout(path: Path, layout: Layout) -> ClsTruth:
    """The labels of ``path`` read in ``layout`` (a reader's decisions are read in the truth's layout)."""
    return _READERS[layout.name](path)


def _read_mura_scores(path: Path) -> Scores:
    """MURA-style header-less ``<image or study path>,<probability>`` rows."""
    records = csv_records(path)
    seen: dict[str, int] = {}
    for line, fields in records:
        if len(fields) != 2:
            raise InputError(f"line {line} has {len(fields)} fields, expected 'path,probability'", file=str(path))
        if fields[0] in seen:
            raise InputError(f"duplicate path on lines {seen[fields[0]]} and {line}", file=str(path), case_id=fields[0])
        seen[fields[0]] = line
    table = read_csv_columns(["path", MURA_FINDING], iter(records), ("path",), (MURA_FINDING,), _score_row)
    return Scores("mura", path, table.text["path"], [MURA_FINDING], table.values, table.lines, table.refused)


def read_scores(path: Path, *, what: str = "predictions") -> Scores:
    """A predictions (or reader decisions) file in one of :data:`SCORE_LAYOUTS` (told from the file), read row
    by row: its ids, line numbers and probabilities (cells that are none noted in :attr:`Scores.refused`)."""
    layout = choose(path, SCORE_LAYOUTS, what=what)
    if layout.name == "mura":
        return _read_mura_scores(path)
    header, rows = stream_csv_rows(path, ())
    key = next(k for k in _SCORE_KEYS if k in header)
    findings = [c for c in header if c != key and c not in _SCORE_EXTRA]
    if not findings:
        raise InputError(f"no finding columns besides {key}", file=str(path), field="header")
    variant = ("dicom_id",) if "dicom_id" in header else ()
    table = read_csv_columns(header, rows, (key, *variant), findings, _score_row)
    ids = _ids(table, key, path, also=variant)
    variants = table.text.get("dicom_id", [])
    return Scores(layout.name, path, ids, findings, table.values, table.lines, table.refused, variants)


def labels_of(codes: np.ndarray, blank: str, uncertain: str) -> tuple[np.ndarray, int]:
    """Labels 1 / 0 / NaN from coded labels and the number of uncertain entries: ``blank`` ``negative`` makes a
    blank 0, ``uncertain`` makes it uncertain; an uncertain entry follows ``uncertain`` (``ignore``: NaN,
    ``zeros``: 0, ``ones``: 1)."""
    is_uncertain = (codes == UNCERTAIN) | ((codes == BLANK) & (blank == "uncertain"))
    fill = {"ignore": math.nan, "zeros": 0.0, "ones": 1.0}[uncertain]
    labels = np.where(codes == BLANK, 0.0, codes)
    return np.where(is_uncertain, fill, labels), int(is_uncertain.sum())
