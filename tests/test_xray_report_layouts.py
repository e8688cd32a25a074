"""``xray/report`` native reference layouts (issue 21): OpenI XML, Kaggle ``indiana_reports.csv`` and R2Gen's
``annotation.json``, each scored as the generic JSON Lines path scores the same references written by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.xray_cli import fail_line, run_task
from trackeval.benchmarks.xray.report_layouts import r2gen_clean

F1 = (
    "The cardiac silhouette and mediastinum size are within normal limits. There is no pulmonary edema. There is "
    "no focal consolidation. There are no XXXX of a pleural effusion. There is no evidence of pneumothorax."
)
I1 = "Normal chest x-XXXX."
F2 = "Borderline cardiomegaly. Midline sternotomy XXXX. Enlarged pulmonary arteries. Clear lungs."
I2 = "No acute pulmonary findings."
I3 = "No active disease."
OPENI = """<?xml version="1.0" encoding="utf-8"?>
<eCitation>
   <meta type="rr"/>
   <uId id="CXR{n}"/>
   <pmcId id="{n}"/>
   <docSource>CXR</docSource>
   <IUXRId id="{n}"/>
   <licenseType>open-access</licenseType>
   <publisher>Indiana University</publisher>
   <MedlineCitation Owner="Indiana University" Status="supplied by publisher">
      <Article PubModel="Electronic">
         <ArticleTitle>Indiana University Chest X-ray Collection</ArticleTitle>
         <Abstract>
            <AbstractText Label="COMPARISON">None.</AbstractText>
            <AbstractText Label="INDICATION">Positive TB test</AbstractText>
            {findings}
            <AbstractText Label="IMPRESSION">{impression}</AbstractText>
         </Abstract>
      </Article>
   </MedlineCitation>
   <MeSH>
      <major>normal</major>
   </MeSH>
   <parentImage id="CXR{n}_1_IM-000{n}-3001">
      <figureId>F1</figureId>
      <caption>Xray Chest PA and Lateral</caption>
   </parentImage>
</eCitation>
"""
INDIANA_HEADER = ["uid", "MeSH", "Problems", "image", "indication", "comparison", "findings", "impression"]
PREDICTIONS = {
    "1": "The heart size is within normal limits. No pleural effusion or pneumothorax.",
    "2": "Mild cardiomegaly. The lungs are clear.",
    "3": "No acute disease.",
}


def _jsonl(path: Path, rows: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps({"id": k, "report": v}) + "\n" for k, v in rows.items()))
    return path


def _same_numbers(a: dict, b: dict) -> None:
    assert a["aggregates"].keys() == b["aggregates"].keys()
    for key, agg in b["aggregates"].items():
        assert a["aggregates"][key]["value"] == pytest.approx(agg["value"], abs=1e-12), key
        assert a["aggregates"][key]["ci95_low"] == pytest.approx(agg["ci95_low"], abs=1e-12), key


def _openi(folder: Path) -> Path:
    """Three OpenI reports; CXR3 has an empty FINDINGS element (as ~500 of the real ones)."""
    folder.mkdir()
    body = {1: (F1, I1), 2: (F2, I2), 3: (None, I3)}
    for n, (findings, impression) in body.items():
        el = (
            '<AbstractText Label="FINDINGS"/>'
            if findings is None
            else f'<AbstractText Label="FINDINGS">{findings}</AbstractText>'
        )
        (folder / f"{n}.xml").write_text(OPENI.format(n=n, findings=el, impression=impression), encoding="utf-8")
    return folder


def test_openi_xml_findings_by_default_and_with_impression(tmp_path):
    reports = _openi(tmp_path / "ecgen-radiology")
    pred = _jsonl(tmp_path / "pred.jsonl", {f"CXR{k}": v for k, v in PREDICTIONS.items()})
    res = run_task("report", reports, pred, tmp_path / "out")
    assert res["config"]["format"] == {"ground_truth": "openi-xml", "predictions": "generic"}
    assert res["summary"]["n_reports"] == 2
    assert any("1 report(s) without text" in w and "'CXR3'" in w for w in res["warnings"])
    by_hand = _jsonl(tmp_path / "refs.jsonl", {"CXR1": F1, "CXR2": F2})
    pred2 = _jsonl(tmp_path / "pred2.jsonl", {"CXR1": PREDICTIONS["1"], "CXR2": PREDICTIONS["2"]})
    generic = run_task("report", by_hand, pred2, tmp_path / "generic")
    _same_numbers(res, generic)
    assert res["data"]["ground_truth_digest"] != generic["data"]["ground_truth_digest"]
    both = run_task(
        "report", reports, pred, tmp_path / "both", "--set", 'xray.report.sections=["findings","impression"]'
    )
    by_hand = _jsonl(tmp_path / "refs2.jsonl", {"CXR1": f"{F1} {I1}", "CXR2": f"{F2} {I2}", "CXR3": I3})
    generic = run_task("report", by_hand, pred, tmp_path / "generic2")
    _same_numbers(both, generic)
    assert both["data"]["ground_truth_digest"] != res["data"]["ground_truth_digest"]
    pred3 = _jsonl(tmp_path / "pred3.jsonl", {"CXR2": PREDICTIONS["2"]})
    one = run_task("report", reports / "2.xml", pred3, tmp_path / "one", "--set", 'xray.report.sections=["impression"]')
    assert one["summary"]["n_reports"] == 1


def test_indiana_csv_matches_openi(tmp_path):
    rows = [
        ["1", "normal", "normal", "Xray Chest PA and Lateral", "Positive TB test", "None.", F1, I1],
        ["2", "Cardiomegaly/borderline", "Cardiomegaly", "Chest, 2 views", "Preop", "", F2, I2],
        ["3", "normal", "normal", "Xray Chest PA and Lateral", "", "", "", I3],
    ]
    path = tmp_path / "indiana_reports.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([INDIANA_HEADER, *rows])
    pred = _jsonl(tmp_path / "pred.jsonl", PREDICTIONS)
    res = run_task("report", path, pred, tmp_path / "out")
    assert res["config"]["format"]["ground_truth"] == "indiana-csv"
    openi = run_task(
        "report",
        _openi(tmp_path / "xml"),
        _jsonl(tmp_path / "p2.jsonl", {f"CXR{k}": v for k, v in PREDICTIONS.items()}),
        tmp_path / "openi",
    )
    for key, agg in openi["aggregates"].items():
        assert res["aggregates"][key]["value"] == pytest.approx(agg["value"], abs=1e-12), key


def test_r2gen_clean_by_hand():
    assert r2gen_clean("1. Heart size normal.. 2. No effusion/pneumothorax.") == (
        "heart size normal . no effusionpneumothorax ."
    )
    assert r2gen_clean('The "XXXX" is (stable); T6-T7: ok? 3. Done.') == "the xxxx is stable t6-t7 ok . done ."
    assert r2gen_clean("Lungs clear.\n\nNo  __ effusion.", mimic=True) == "lungs clear . no  effusion ."
    assert r2gen_clean("Lungs clear.\n\nNo  __ effusion.") == "lungs clear\n\nno   effusion ."


def test_r2gen_annotation_json_test_split(tmp_path):
    raw = {
        "CXR2384_IM-0942": "1. The heart size is normal.. 2. A large hiatal hernia is noted.",
        "CXR2926_IM-1328": "Cardiac and mediastinal contours are within normal limits. The lungs are clear.",
    }
    doc = {
        "train": [{"id": "CXR1_1_IM-0001", "report": "Train only.", "image_path": ["a/0.png"], "split": "train"}],
        "val": [],
        "test": [
            {"id": k, "report": v, "image_path": [f"{k}/0.png", f"{k}/1.png"], "split": "test"} for k, v in raw.items()
        ],
    }
    ann = tmp_path / "annotation.json"
    ann.write_text(json.dumps(doc))
    pred = _jsonl(tmp_path / "pred.jsonl", {"CXR2384_IM-0942": "the heart is normal . hiatal hernia ."})
    res = run_task("report", ann, pred, tmp_path / "out")
    assert res["config"]["format"]["ground_truth"] == "r2gen"
    assert res["summary"] == {"n_reports": 2, "n_missing_predictions": 1}
    cleaned = {  # by hand: numbering and double dots gone, lower case, ". " -> " . ", final " ."
        "CXR2384_IM-0942": "the heart size is normal . a large hiatal hernia is noted .",
        "CXR2926_IM-1328": "cardiac and mediastinal contours are within normal limits . the lungs are clear .",
    }
    generic = run_task("report", _jsonl(tmp_path / "refs.jsonl", cleaned), pred, tmp_path / "generic")
    _same_numbers(res, generic)
    train = run_task(
        "report",
        ann,
        _jsonl(tmp_path / "p.jsonl", {"CXR1_1_IM-0001": "train"}),
        tmp_path / "train",
        "--set",
        "xray.report.split=train",
    )
    assert train["summary"]["n_reports"] == 1


def test_report_layout_errors_and_forcing(tmp_path, capsys):
    pred = _jsonl(tmp_path / "pred.jsonl", {"CXR1": "no effusion"})
    folder = tmp_path / "xml"
    folder.mkdir()
    (folder / "1.xml").write_text("<eCitation><Abstract><AbstractText Label='FINDINGS'>x</AbstractText>")
    fail_line(capsys, "report", folder, pred, tmp_path / "o1", "malformed XML", "1.xml")
    (folder / "1.xml").write_text("<eCitation><AbstractText Label='FINDINGS'>x</AbstractText></eCitation>")
    fail_line(capsys, "report", folder, pred, tmp_path / "o2", "no <uId", "field=uId")
    _openi(tmp_path / "dup")
    (tmp_path / "dup" / "4.xml").write_text(OPENI.format(n=1, findings="", impression=I1))
    fail_line(capsys, "report", tmp_path / "dup", pred, tmp_path / "o3", "also in 1.xml", "case=CXR1", "4.xml")
    ann = tmp_path / "annotation.json"
    ann.write_text(json.dumps({"train": [{"id": "a", "report": "x"}]}))
    fail_line(capsys, "report", ann, pred, tmp_path / "o4", "under 'test'", "field=test")
    empty = tmp_path / "empty"
    empty.mkdir()
    fail_line(
        capsys, "report", empty, pred, tmp_path / "o5", "looks like none of the layouts", "openi-xml (", "r2gen ("
    )
    refs = _jsonl(tmp_path / "refs.jsonl", {"CXR1": "no effusion"})
    assert run_task("report", refs, pred, tmp_path / "g")["config"]["format"] == {
        "ground_truth": "generic",
        "predictions": "generic",
    }
    fail_line(capsys, "report", refs, pred, tmp_path / "o6", "under 'test'", "refs.jsonl", extra=("--format", "r2gen"))
    fail_line(
        capsys, "report", refs, pred, tmp_path / "o7", "missing required column", extra=("--format", "indiana-csv")
    )
    fail_line(capsys, "report", refs, pred, tmp_path / "o8", "malformed XML", extra=("--format", "openi-xml"))
    csv_path = tmp_path / "indiana_reports.csv"
    csv_path.write_text("uid,findings,impression\n1,a,b\n1,c,d\n")
    fail_line(capsys, "report", csv_path, pred, tmp_path / "o9", "repeated uid", "case=1", "field=uid")
