"""Native reference layouts of ``xray/report`` (IU X-ray as distributed), read into ``{id: [reference text]}``.

* ``openi-xml``: the OpenI ``ecgen-radiology`` reports (a folder of ``<n>.xml``, or one file): root
  ``eCitation``, the report id in ``<uId id="CXR1"/>``, sections as ``<AbstractText Label="FINDINGS">``
  (also ``IMPRESSION``, ``COMPARISON``, ``INDICATION``; an empty section is an empty element).
* ``indiana-csv``: Kaggle's ``indiana_reports.csv`` (``uid, MeSH, Problems, image, indication, comparison,
  findings, impression``); the report id is ``uid`` (``1`` for OpenI's ``CXR1``).
* ``r2gen``: R2Gen's ``annotation.json`` (``{"train" | "val" | "test": [{"id", "report", "image_path",
  "split"}]}``), the ``xray.report.split`` list; the reference is the report as R2Gen's tokenizer cleans it
  (:func:`r2gen_clean`; the MIMIC-CXR cleaning when the entries carry ``subject_id``, as R2Gen's MIMIC-CXR
  file does, else the IU X-ray one).

For OpenI and indiana the reference is the ``xray.report.sections`` (default findings, the text R2Gen's IU X-ray
split uses) joined by a space; a report whose chosen sections are all empty is left out (counted by the task).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trackeval.errors import InputError
from trackeval.io.files import open_regular, read_open
from trackeval.io.structured import read_json, read_xml
from trackeval.io.tables import read_csv_rows

INDIANA_COLUMNS = ("uid", "findings", "impression")
_HEAD_BYTES = 1 << 16
#: R2Gen's sentence cleaning deletes these characters: its character class ``[.,?;*!%^&_+():-\[\]{}]`` read as
#: Python reads it (``:-\[`` is the range ``:`` .. ``[``, i.e. ``:;<=>?@``, the capitals and ``[``)
_R2GEN_DROP = re.compile(r"[.,?;*!%^&_+()\[\]{}:;<=>?@A-Z]")
#: R2Gen's list-numbering rewrites, in its order (``1. `` dropped, `` 2. `` .. `` 5. `` made sentence ends)
_R2GEN_NUMBERING = (
    (("1. ", ""),) + tuple((f". {k}. ", ". ") for k in range(2, 6)) + tuple((f" {k}. ", ". ") for k in range(2, 6))
)


def _repeat(text: str, old: str, new: str, times: int) -> str:
    for _ in range(times):
        text = text.replace(old, new)
    return text


def r2gen_clean(report: str, *, mimic: bool = False) -> str:
    """``report`` as R2Gen's ``Tokenizer.clean_report_iu_xray`` (``mimic``: ``clean_report_mimic_cxr``) makes it:
    repeated dots collapsed (3 passes; MIMIC: newlines to spaces, ``__`` and double spaces collapsed, 8 passes),
    list numbers removed, lower-cased, split at ``". "``, each sentence stripped of quotes, slashes and
    backslashes and of :data:`_R2GEN_DROP`, joined by ``" . "`` and ended by ``" ."``. Empty sentences are
    kept, as R2Gen keeps them (its emptiness test compares a string with a list).

    Examples:
        >>> from trackeval.benchmarks.xray.report_layouts import r2gen_clean
        >>> r2gen_clean("1. Heart size normal.. 2. No effusion/pneumothorax.")
        'heart size normal . no effusionpneumothorax .'
    """
    text = report
    if mimic:
        text = _repeat(_repeat(text.replace("\n", " "), "__", "_", 7), "  ", " ", 6)
    text = _repeat(text, "..", ".", 8 if mimic else 3)
    for old, new in _R2GEN_NUMBERING:
        text = text.replace(old, new)
    sentences = text.strip().lower().split(". ")
    strip = str.maketrans("", "", "\"/\\'")
    cleaned = [_R2GEN_DROP.sub("", s.translate(strip).strip().lower()) for s in sentences]
    return " . ".join(cleaned) + " ."


# ---------------------------------------------------------------- layout tests


def _head(path: Path) -> bytes:
    with open_regular(path) as f:
        return read_open(f, path, size=_HEAD_BYTES)


def is_openi_xml(path: Path) -> bool:
    """An ``.xml`` file, or a folder holding one."""
    if path.is_dir():
        return any(p.suffix.lower() == ".xml" for p in path.iterdir())
    return path.is_file() and path.suffix.lower() == ".xml"


def is_indiana_csv(path: Path) -> bool:
    """A file whose first line names ``uid``, ``findings`` and ``impression``."""
    if not path.is_file():
        return False
    first = _head(path).split(b"\n", 1)[0].decode("utf-8-sig", errors="replace")
    return set(INDIANA_COLUMNS) <= {c.strip().strip('"') for c in first.split(",")}


def is_r2gen(path: Path) -> bool:
    """A ``.json`` file (not JSON Lines) holding one object with ``"report"`` entries."""
    if not path.is_file() or path.suffix.lower() != ".json":
        return False
    head = _head(path).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{") and b'"report"' in head


# ---------------------------------------------------------------- readers


def _joined(sections: dict[str, str], chosen: Sequence[str]) -> str:
    """The non-empty ``chosen`` sections joined by a space ("" when all are empty)."""
    return " ".join(t for t in (" ".join(sections.get(s, "").split()) for s in chosen) if t)


def _openi_report(path: Path) -> tuple[str, dict[str, str]]:
    """``(uId, {section label lower-cased: text})`` of one OpenI XML report."""
    root = read_xml(path)
    uid = root.find(".//uId")
    rid = uid.get("id", "") if uid is not None else ""
    if not rid:
        raise InputError("no <uId id=...> element: the report has no id", file=str(path), field="uId")
    sections = {}
    for el in root.iter("AbstractText"):
        label = (el.get("Label") or "").strip().lower()
        if label:
            sections[label] = "".join(el.itertext())
    return rid, sections


def read_openi(path: Path, sections: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
    """``{uId: [reference]}`` of an OpenI folder (files in name order) or file, and the ids left out (empty)."""
    files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".xml") if path.is_dir() else [path]
    refs: dict[str, list[str]] = {}
    seen: dict[str, Path] = {}
    empty = []
    for file in files:
        rid, found = _openi_report(file)
        if rid in seen:
            raise InputError(f"report id also in {seen[rid].name}", file=str(file), case_id=rid, field="uId")
        seen[rid] = file
        text = _joined(found, sections)
        if text:
            refs[rid] = [text]
        else:
            empty.append(rid)
    return refs, empty


def read_indiana(path: Path, sections: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
    """``{uid: [reference]}`` of ``indiana_reports.csv`` and the uids left out (chosen sections empty)."""
    refs: dict[str, list[str]] = {}
    empty = []
    for line, row in enumerate(read_csv_rows(path, INDIANA_COLUMNS), start=2):
        rid = row["uid"]
        if not rid or rid in refs or rid in empty:
            raise InputError(f"row on line {line}: empty or repeated uid", file=str(path), case_id=rid, field="uid")
        text = _joined(row, sections)
        if text:
            refs[rid] = [text]
        else:
            empty.append(rid)
    return refs, empty


def _r2gen_entries(doc: Any, path: Path, split: str) -> list[dict[str, Any]]:
    entries = doc.get(split) if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise InputError(f"annotation.json needs a list of objects under {split!r}", file=str(path), field=split)
    if not entries:
        raise InputError(f"the {split!r} split is empty", file=str(path), field=split)
    return entries


def read_r2gen(path: Path, split: str) -> dict[str, list[str]]:
    """``{id: [R2Gen-cleaned report]}`` of the ``split`` list of an R2Gen ``annotation.json``."""
    entries = _r2gen_entries(read_json(path), path, split)
    refs: dict[str, list[str]] = {}
    for i, e in enumerate(entries):
        rid, report = e.get("id"), e.get("report")
        if not isinstance(rid, str) or not rid:
            raise InputError(f"{split}[{i}]: missing or invalid 'id'", file=str(path), field="id")
        if rid in refs:
            raise InputError(f"{split}[{i}]: duplicate id", file=str(path), case_id=rid, field="id")
        if not isinstance(report, str):
            raise InputError(f"{split}[{i}]: 'report' must be a string", file=str(path), case_id=rid, field="report")
        refs[rid] = [r2gen_clean(report, mimic="subject_id" in e)]
    return refs
