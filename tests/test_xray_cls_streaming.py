"""``xray/cls`` label and score tables read row by row (:func:`trackeval.io.tables.read_csv_columns`): the arrays
of the hand-coded files and of an independent pandas read, the same one-line errors (now raised while
streaming), physical line numbers, and what is kept per study (ids and float rows, nothing per cell)."""

from __future__ import annotations

import importlib.util
import tracemalloc
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from tests.xray_cli import fail_line
from trackeval.benchmarks.xray.cls_align import align_scores
from trackeval.benchmarks.xray.cls_layouts import BLANK, UNCERTAIN, read_scores, read_truth
from trackeval.errors import InputError
from trackeval.io.tables import read_csv_columns, read_csv_rows, stream_csv_rows

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_cls_read.py"
FINDINGS = ["Atelectasis", "Cardiomegaly", "Edema"]
LABELS = "subject_id,study_id,Atelectasis,Cardiomegaly,Edema\n"
SCORES = "study_id,Atelectasis,Cardiomegaly,Edema\n"
CODES = {"1.0": 1.0, "1": 1.0, "0.0": 0.0, "0": 0.0, "-1.0": UNCERTAIN, "-1": UNCERTAIN, "": BLANK}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


def _bench() -> ModuleType:
    """benchmarks/bench_cls_read.py (its seeded MIMIC-CXR writer)."""
    spec = importlib.util.spec_from_file_location("bench_cls_read", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mimic(tmp_path: Path) -> tuple[Path, Path]:
    """Three studies of two patients, every label spelling, scores per image (study 50414267 has two)."""
    labels = _write(
        tmp_path / "mimic-cxr-2.0.0-chexpert.csv",
        LABELS + "10000032,50414267,1.0,,-1.0\n10000032,53189527,0,1,\n10000033,50000001,-1,0.0,1\n",
    )
    scores = _write(
        tmp_path / "scores.csv",
        "study_id,dicom_id,Atelectasis,Cardiomegaly,Edema\n"
        "50414267,d1,0.25,0.5,1\n"
        "s50414267,d2,0.75,0.125,0\n"
        "53189527,d3,0.5,0.375,0.625\n"
        "50000001,d4,-0,0.875,0.0625\n",
    )
    return labels, scores


def test_mimic_labels_and_pooled_scores_are_the_hand_coded_arrays(tmp_path: Path) -> None:
    labels, scores = _mimic(tmp_path)
    truth = read_truth(labels)
    assert truth.ids == ["50414267", "53189527", "50000001"] and truth.keys == truth.ids
    assert truth.subjects == ["10000032", "10000032", "10000033"]
    assert truth.subjects[0] is truth.subjects[1]  # one string per patient, not one per row
    u, b = UNCERTAIN, BLANK
    np.testing.assert_array_equal(truth.codes, [[1, b, u], [0, 1, b], [u, 0, 1]])
    read = read_scores(scores)
    assert read.ids == ["50414267", "s50414267", "53189527", "50000001"] and list(read.lines) == [2, 3, 4, 5]
    assert read.variants == ["d1", "d2", "d3", "d4"] and read.refused == {}
    by_max = align_scores(truth, read, FINDINGS, None)  # MIMIC pools a study's images by max
    np.testing.assert_array_equal(by_max, [[0.75, 0.5, 1.0], [0.5, 0.375, 0.625], [0.0, 0.875, 0.0625]])
    by_mean = align_scores(truth, read, FINDINGS, "mean")
    np.testing.assert_array_equal(by_mean, [[0.5, 0.3125, 0.5], [0.5, 0.375, 0.625], [0.0, 0.875, 0.0625]])
    assert np.signbit(by_max[2, 0]) and not np.signbit(by_mean[2, 0])  # np.max keeps -0.0, np.mean gives 0.0


def test_a_generated_mimic_pair_reads_as_pandas_reads_it(tmp_path: Path) -> None:
    """2,000 studies of the benchmark's writer: codes and scores equal an independent pandas read, studies and
    patients in file order."""
    labels, scores = _bench().write_files(tmp_path, 2000)
    frame = pd.read_csv(labels, dtype=str, keep_default_na=False)
    truth = read_truth(labels)
    assert truth.ids == list(frame["study_id"]) and truth.subjects == list(frame["subject_id"])
    np.testing.assert_array_equal(truth.codes, frame[truth.findings].map(CODES.__getitem__).to_numpy())
    expected = pd.read_csv(scores)
    read = read_scores(scores)
    assert read.ids == [str(s) for s in expected["study_id"]] and read.findings == truth.findings
    assert read.values.tobytes() == expected[read.findings].to_numpy(dtype=np.float64).tobytes()


def test_pooling_is_numpys_max_and_mean_over_each_studys_images(tmp_path: Path) -> None:
    """1 to 9 images per study, random 6-decimal scores: each study's row is ``np.max`` / ``np.mean`` over its
    image rows in file order, bit for bit."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 10, 60)
    values = np.round(rng.random((int(sizes.sum()), 3)), 6)
    study = np.repeat(np.arange(60), sizes)
    order = rng.permutation(study.size)  # a study's images are scattered through the file
    label_rows = "".join(f"1,{50000000 + s},1,0,\n" for s in range(60))
    score_rows = "".join(f"{50000000 + study[r]},d{r},{','.join(map(str, values[r]))}\n" for r in order)
    truth = read_truth(_write(tmp_path / "mimic-cxr-2.0.0-chexpert.csv", LABELS + label_rows))
    read = read_scores(_write(tmp_path / "scores.csv", "study_id,dicom_id," + ",".join(FINDINGS) + "\n" + score_rows))
    for pool, reduce in (("max", np.max), ("mean", np.mean)):
        expected = np.array([reduce(values[order[study[order] == s]], axis=0) for s in range(60)])
        assert align_scores(truth, read, FINDINGS, pool).tobytes() == expected.tobytes()


def test_a_bad_score_is_an_error_only_in_an_evaluated_finding_the_first_in_file_order(tmp_path: Path) -> None:
    labels, _ = _mimic(tmp_path)
    scores = _write(
        tmp_path / "scores.csv",
        SCORES + "50414267,0.1,nan,0.2\n53189527,0.3,0.4,1.5\n50000001,x,0.5,0.6\n",
    )
    truth, read = read_truth(labels), read_scores(scores)
    assert read.refused == {0: (2, "x"), 1: (0, "nan"), 2: (1, "1.5")}
    assert np.isnan(read.values[[2, 0, 1], [0, 1, 2]]).all()
    cases = [
        (["Atelectasis"], "score 'x' on line 4 is not a number", "50000001", "Atelectasis"),
        (["Edema", "Atelectasis"], "score 1.5 on line 3 is not a probability in [0, 1]", "53189527", "Edema"),
        (FINDINGS, "score 'nan' on line 2 is NaN or infinite", "50414267", "Cardiomegaly"),
    ]
    for findings, message, case, finding in cases:
        with pytest.raises(InputError) as err:
            align_scores(truth, read, findings, None)
        assert (err.value.message, err.value.file, err.value.case_id, err.value.field) == (
            message,
            str(scores),
            case,
            finding,
        )


def test_a_bad_label_names_its_physical_line(tmp_path: Path) -> None:
    """A blank line and a quoted line break before the bad cell: the line named is the one the row is on."""
    labels = _write(
        tmp_path / "mimic-cxr-2.0.0-chexpert.csv",
        LABELS + '10000032,50414267,1.0,"\n",0\n\n10000032,53189527,0,1,yes\n',
    )
    with pytest.raises(InputError) as err:
        read_truth(labels)
    assert err.value.message == "label 'yes' on line 5 is not 1, 0, -1 or blank"
    assert (err.value.case_id, err.value.field) == ("53189527", "Edema")


@pytest.mark.parametrize(
    ("which", "body", "needles"),
    [
        ("labels", LABELS + '10000032,50414267,1.0,0,0\n10000032,53189527,"1,0,0\n', ("malformed CSV", "line 3")),
        ("scores", SCORES + "50414267,0.1,0.2,0.3\n53189527,0.1,0.2\n", ("line 3 has 3 fields",)),
    ],
)
def test_a_malformed_row_is_one_error_line(tmp_path: Path, capsys, which: str, body: str, needles) -> None:
    labels, scores = _mimic(tmp_path)
    bad = _write(labels if which == "labels" else scores, body)
    fail_line(capsys, "cls", labels, scores, tmp_path / "out", *needles, f"file={bad}", "field=line 3")


def test_rows_are_checked_as_the_stream_reaches_them(tmp_path: Path) -> None:
    """The header is checked up front; a ragged row only when reached (read_csv_rows reaches every row)."""
    path = _write(tmp_path / "t.csv", "id,v\na,1\nb,2,3\n")
    header, rows = stream_csv_rows(path, ("id",))
    assert header == ["id", "v"] and next(rows) == (2, ["a", "1"])
    with pytest.raises(InputError, match="line 3 has 3 fields, the header has 2"):
        next(rows)
    with pytest.raises(InputError, match="line 3 has 3 fields"):
        read_csv_rows(path, ("id",))
    with pytest.raises(InputError, match=r"missing required column\(s\) \['w'\]"):
        stream_csv_rows(path, ("w",))


def test_read_csv_columns_keeps_chosen_columns_and_the_first_refused_cell_of_each(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.csv", "id,site,a,b\nx, north ,1,2\ny,north,?,3\n\nz,south,4,!\nw,south,?,5\n")
    header, rows = stream_csv_rows(path, ())

    def parse(cells: list[str]) -> list[float | None]:
        return [float(c) if c.isdigit() else None for c in cells]

    table = read_csv_columns(header, rows, ("id", "site"), ("a", "b"), parse, shared=("site",))
    assert table.text == {"id": ["x", "y", "z", "w"], "site": ["north", "north", "south", "south"]}
    assert table.text["site"][2] is table.text["site"][3] and list(table.lines) == [2, 3, 5, 6]
    np.testing.assert_array_equal(table.values, [[1, 2], [np.nan, 3], [4, np.nan], [np.nan, 5]])
    assert table.refused == {0: (1, "?"), 1: (2, "!")}


def test_reading_keeps_ids_and_float_rows_not_a_string_per_cell(tmp_path: Path) -> None:
    """5,000 studies x 14 findings: what read_truth + read_scores keep is the float rows (2 x 14 x 8 B) and the
    ids, under 640 B per study (a dict of strings per row kept about 1,500 B)."""
    labels, scores = _bench().write_files(tmp_path, 5000)
    tracemalloc.start()
    try:
        kept = (read_truth(labels), read_scores(scores))
        per_study = tracemalloc.get_traced_memory()[0] / 5000
    finally:
        tracemalloc.stop()
    assert kept[0].codes.shape == kept[1].values.shape == (5000, 14)
    assert per_study < 640, per_study
