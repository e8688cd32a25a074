"""3D-MIR adapter: real labels and splits (random and oracle baselines), hand-computed values, every validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from tests.conftest import evaluate_argv
from tests.results_doc import results_doc
from trackeval.benchmarks.mir3d.adapter import score_region
from trackeval.benchmarks.mir3d.config import Mir3dConfig
from trackeval.benchmarks.mir3d.readers import RankedList, load_ground_truth
from trackeval.cli import main
from trackeval.demo.mir3d_baselines import data_dir, oracle_rankings, random_rankings, write_baseline

METRICS = ("p_at_1", "p_at_3", "p_at_5", "p_at_10", "ap_at_10")


def _argv(gt: Path, pred: Path, out: Path, *extra: str) -> list[str]:
    return evaluate_argv("mir3d", gt, pred, out, "--set", "bootstrap.n_resamples=200", *extra)


def _run(gt: Path, pred: Path, out: Path, *extra: str) -> dict:
    assert main(_argv(gt, pred, out, *extra)) == 0
    return results_doc(out)


def _lists(truth, rows) -> dict[tuple[str, str], RankedList]:
    """The validated-list form of ``(region, query, rank, retrieved)`` rows (rows come in rank order)."""
    pos = {r: {n: i for i, n in enumerate(t.index)} for r, t in truth.items()}
    out: dict[tuple[str, str], list[int]] = {}
    for region, query, _, retrieved in rows:
        out.setdefault((region, query), []).append(pos[region][retrieved])
    return {key: RankedList(*key, tuple(p)) for key, p in out.items()}


# ---------------------------------------------------------------------------------------------------------------
# Real 3D-MIR labels and splits (bundled copy)
# ---------------------------------------------------------------------------------------------------------------


def test_bundled_ground_truth_counts() -> None:
    truth = load_ground_truth(data_dir())
    # counts of the published 3D-MIR splits (644 train / 107 test; docs/benchmarks/mir3d.md)
    assert {r: (len(t.index), len(t.queries)) for r, t in truth.items()} == {
        "colon": (156, 24),
        "liver": (157, 19),
        "lung": (62, 32),
        "pancreas": (269, 32),
    }
    assert all(not t.overlap for t in truth.values())
    colon = truth["colon"]
    groups, counts = np.unique(colon.label_array("group", colon.index), return_counts=True)
    assert dict(zip(groups.tolist(), counts.tolist(), strict=True)) == {-1: 44, 2: 20, 3: 44, 4: 48}
    assert int(truth["pancreas"].label_array("flag", truth["pancreas"].queries).sum()) == 28


def test_random_baseline_matches_analytical_expectation() -> None:
    truth = load_ground_truth(data_dir())
    cfg = Mir3dConfig()
    n_seeds = 200
    sums = {r: {kind: {m: 0.0 for m in METRICS} for kind in ("flag", "group")} for r in truth}
    for seed in range(n_seeds):
        lists = _lists(truth, random_rankings(truth, seed))
        for region, t in truth.items():
            for kind, metrics in score_region(t, lists, cfg).items():
                for m in METRICS:
                    sums[region][kind][m] += metrics[m].mean() / n_seeds
    published = {  # protocols 1.3, random-retrieval baseline (3 decimals)
        "colon": (0.536, 0.269),
        "liver": (0.562, 0.310),
        "lung": (0.500, 0.279),
        "pancreas": (0.797, 0.433),
    }
    for region, t in truth.items():
        for j, kind in enumerate(("flag", "group")):
            q, idx = t.label_array(kind, t.queries), t.label_array(kind, t.index)
            p = (idx[None, :] == q[:, None]).mean(axis=1)  # per query: fraction of same-label items in the index
            assert p.mean() == pytest.approx(published[region][j], abs=5e-4)
            for k in (1, 3, 5, 10):
                # standard error of the mean over queries and seeds (binomial bound on the hypergeometric variance)
                se = np.sqrt(np.mean(p * (1 - p)) / k / (len(p) * n_seeds))
                assert abs(sums[region][kind][f"p_at_{k}"] - p.mean()) < 5 * se + 1e-12, (region, kind, k)


def test_oracle_baseline_end_to_end(tmp_path: Path) -> None:
    gt = data_dir()
    truth = load_ground_truth(gt)
    pred = write_baseline("oracle", tmp_path / "oracle" / "rankings.csv")
    res = _run(gt, pred, tmp_path / "out")
    res_trec = _run(gt, pred, tmp_path / "out_trec", "--set", "mir3d.ap_denominator=total_in_index")
    cases = {c["case_id"]: c for c in res["cases"]}
    cases_trec = {c["case_id"]: c for c in res_trec["cases"]}
    n_checked = 0
    for region, t in truth.items():
        for kind in ("flag", "group"):
            q, idx = t.label_array(kind, t.queries), t.label_array(kind, t.index)
            n_rel = (idx[None, :] == q[:, None]).sum(axis=1)
            for query, r in zip(t.queries, n_rel, strict=True):
                m = cases[f"{region}/{query}"]["metrics"][region]
                for k in (1, 3, 5, 10):
                    assert m[f"{kind}/p_at_{k}"] == pytest.approx(min(r, k) / k)
                    n_checked += r >= k
                assert m[f"{kind}/ap_at_10"] == 1.0  # every query has a relevant item in its index
                trec = cases_trec[f"{region}/{query}"]["metrics"][region][f"{kind}/ap_at_10"]
                assert trec == pytest.approx(min(r, 10) / r)  # trec_eval: all top-10 hits over R in the index
    assert n_checked > 700  # most (query, k) pairs have enough relevant items: P@k = 1 there
    assert res["aggregates"]["mir3d/flag/p_at_10"]["value"] == 1.0
    assert res["aggregates"]["mir3d/group/ap_at_10"]["value"] == 1.0
    assert res["summary"]["n_queries"] == 107 and res["summary"]["audit/n_query_index_overlap"] == 0


def test_random_baseline_file_is_seeded(tmp_path: Path) -> None:
    a = write_baseline("random", tmp_path / "a.csv", seed=3).read_bytes()
    assert a == write_baseline("random", tmp_path / "b.csv", seed=3).read_bytes()
    assert a != write_baseline("random", tmp_path / "c.csv", seed=4).read_bytes()
    assert len(oracle_rankings(load_ground_truth(data_dir()))) == 1070


# ---------------------------------------------------------------------------------------------------------------
# Hand-computed toy benchmark in the original layout (BOM, lung-style split without an index column)
# ---------------------------------------------------------------------------------------------------------------

COLON_INDEX = {  # name: (flag, group)
    "i01": (1, 2),
    "i02": (1, 3),
    "i03": (0, -1),
    "i04": (1, 2),
    "i05": (0, -1),
    "i06": (1, 4),
    "i07": (1, 2),
    "i08": (0, -1),
    "i09": (1, 3),
    "i10": (1, 2),
    "i11": (0, -1),
    "i12": (1, 2),
}
COLON_QUERIES = {"q1": (1, 2), "q2": (0, -1), "q3": (1, 3)}
LUNG_INDEX = {"j1": (1, 1), "j2": (0, -1), "j3": (1, 1)}
LUNG_QUERIES = {"k1": (1, 1)}
Q1 = ["i01", "i03", "i02", "i04", "i05", "i06", "i08", "i11", "i07", "i09"]
RANKINGS = (
    [("colon", "q1", r, v) for r, v in enumerate(Q1, start=1)]
    + [("colon", "q2", r, v) for r, v in enumerate(["i02", "i03", "i05"], start=1)]
    + [("lung", "k1", 1, "j2"), ("lung", "k1", 2, "j1")]
)  # q3 has no ranking
HEADER = "region,query,rank,retrieved,score\n"


def _labels_csv(path: Path, rows: dict[str, tuple[int, int]], bom: bool) -> None:
    lines = ["name,organ,max_tumor_size,number_tumors,lesion_group,cancer_flag,CaptionV1"]
    for name, (flag, group) in rows.items():
        lines.append(f'{name},colon,1.5,{flag},{group},{flag},"a caption,\nover two lines"')
    path.write_text(("\ufeff" if bom else "") + "\r\n".join(lines) + "\r\n", encoding="utf-8")


def _split_csv(path: Path, names: list[str], column: str, index_col: bool) -> None:
    lines = [f",{column}" if index_col else column]
    lines += [f"{i},{n}" if index_col else n for i, n in enumerate(names)]
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")


def _toy_gt(root: Path, colon_test: list[str] | None = None) -> Path:
    (root / "3DMIR_labels").mkdir(parents=True)
    (root / "Data_Splits").mkdir()
    _labels_csv(root / "3DMIR_labels/colon_labels_and_captions.csv", COLON_INDEX | COLON_QUERIES, bom=False)
    _labels_csv(root / "3DMIR_labels/lung_labels_and_captions.csv", LUNG_INDEX | LUNG_QUERIES, bom=True)
    _split_csv(root / "Data_Splits/colon_full_train_split.csv", list(COLON_INDEX), "training", True)
    _split_csv(root / "Data_Splits/colon_full_test_split.csv", colon_test or list(COLON_QUERIES), "testing", True)
    _split_csv(root / "Data_Splits/lung_full_train_split.csv", list(LUNG_INDEX), "training", False)
    _split_csv(root / "Data_Splits/lung_full_test_split.csv", list(LUNG_QUERIES), "testing", False)
    return root


def _rankings(path: Path, rows=RANKINGS, extra: str = "") -> Path:
    body = "".join(f"{r},{q},{k},{v},{1.0 / k:.3f}\n" for r, q, k, v in rows)
    path.write_text(HEADER + body + extra, encoding="utf-8")
    return path


@pytest.fixture
def toy(tmp_path: Path) -> tuple[Path, Path]:
    return _toy_gt(tmp_path / "gt"), _rankings(tmp_path / "rankings.csv")


# Hand-computed per-query values. q1 group relevance [1,0,0,1,0,0,0,0,1,0] (R=5 in the index); q1 flag
# relevance [1,0,1,1,0,1,0,0,1,1] (R=8); q2 group = flag relevance [0,1,1] + 7 pads (R=4); q3 missing -> 0;
# k1 relevance [0,1] + 8 pads (R=2 for group and flag).
Q1_FLAG_SUM = 1 + 2 / 3 + 3 / 4 + 4 / 6 + 5 / 9 + 6 / 10
HAND = {
    "retrieved_in_topk": {
        "colon": {
            "group/p_at_1": (1 + 0 + 0) / 3,
            "group/p_at_3": (1 / 3 + 2 / 3 + 0) / 3,
            "group/p_at_5": (2 / 5 + 2 / 5 + 0) / 3,
            "group/p_at_10": (3 / 10 + 2 / 10 + 0) / 3,
            "group/ap_at_10": ((1 + 2 / 4 + 3 / 9) / 3 + (1 / 2 + 2 / 3) / 2 + 0) / 3,
            "flag/p_at_3": (2 / 3 + 2 / 3 + 0) / 3,
            "flag/p_at_10": (6 / 10 + 2 / 10 + 0) / 3,
            "flag/ap_at_10": (Q1_FLAG_SUM / 6 + (1 / 2 + 2 / 3) / 2 + 0) / 3,
        },
        "lung": {"group/p_at_1": 0.0, "group/p_at_3": 1 / 3, "group/p_at_10": 0.1, "group/ap_at_10": 0.5},
    },
    "total_in_index": {
        "colon": {
            "group/ap_at_10": ((1 + 2 / 4 + 3 / 9) / 5 + (1 / 2 + 2 / 3) / 4 + 0) / 3,
            "flag/ap_at_10": (Q1_FLAG_SUM / 8 + (1 / 2 + 2 / 3) / 4 + 0) / 3,
        },
        "lung": {"group/ap_at_10": 0.25, "flag/ap_at_10": 0.25},
    },
}


@pytest.mark.parametrize("denominator", ["retrieved_in_topk", "total_in_index"])
def test_hand_computed_values_and_keys(toy, tmp_path: Path, denominator: str) -> None:
    gt, pred = toy
    res = _run(gt, pred, tmp_path / "out", "--set", f"mir3d.ap_denominator={denominator}")
    agg = res["aggregates"]
    for region, expected in HAND[denominator].items():
        for name, value in expected.items():
            assert agg[f"mir3d/{name}/by_region/{region}"]["value"] == pytest.approx(value, abs=1e-12), name
    for name in ("group/ap_at_10", "flag/ap_at_10"):  # macro mean over the two regions
        macro = np.mean([agg[f"mir3d/{name}/by_region/{r}"]["value"] for r in ("colon", "lung")])
        assert agg[f"mir3d/{name}"]["value"] == pytest.approx(macro)
    expected_keys = set()
    for kind in ("flag", "group"):
        for m in METRICS:
            expected_keys |= {f"mir3d/{kind}/{m}"} | {f"mir3d/{kind}/{m}/by_region/{r}" for r in ("colon", "lung")}
    assert set(agg) == expected_keys
    assert (agg["mir3d/group/p_at_1"]["n"], agg["mir3d/group/p_at_1/by_region/colon"]["n"]) == (4, 3)
    s = agg["mir3d/flag/ap_at_10"]
    assert s["ci95_low"] <= s["value"] <= s["ci95_high"]
    assert res["config"]["mir3d"]["ap_denominator"] == denominator and res["config"]["mir3d"]["p10_mode"] == "correct"
    assert res["summary"] == {
        "n_regions": 2,
        "n_queries": 4,
        "n_missing_queries": 1,
        "n_missing_predictions": 1,
        "n_short_lists": 2,
        "n_rows_ignored": 0,
        "audit/n_query_index_overlap": 0,
        "n_queries/by_region/colon": 3,
        "n_queries/by_region/lung": 1,
        "n_index/by_region/colon": 12,
        "n_index/by_region/lung": 3,
    }
    cases = {c["case_id"]: c for c in res["cases"]}
    assert cases["colon/q3"]["status"] == "missing_prediction"
    assert all(v == 0.0 for v in cases["colon/q3"]["metrics"]["colon"].values())
    assert "ranks 4..10 scored as non-relevant" in cases["colon/q2"]["message"]
    assert cases["colon/q1"]["groups"] == {"region": "colon", "lesion_flag": "1", "lesion_group": "2"}
    flat = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert flat["mir3d/n_missing_queries"] == 1 and flat["mir3d/audit/n_query_index_overlap"] == 0
    assert "1/4 cases have no prediction: colon/q3" in res["warnings"]


def test_default_ap_is_sklearn_on_the_top10_list(toy, tmp_path: Path) -> None:
    gt, pred = toy
    res = _run(gt, pred, tmp_path / "out")
    q1 = next(c for c in res["cases"] if c["case_id"] == "colon/q1")["metrics"]["colon"]
    flag = [COLON_INDEX[v][0] == 1 for v in Q1]
    group = [COLON_INDEX[v][1] == 2 for v in Q1]
    assert q1["flag/ap_at_10"] == pytest.approx(average_precision_score(flag, np.arange(10, 0, -1)))
    assert q1["group/ap_at_10"] == pytest.approx(average_precision_score(group, np.arange(10, 0, -1)))


def test_original_quirk_p10(toy, tmp_path: Path) -> None:
    gt, pred = toy
    res = _run(gt, pred, tmp_path / "out", "--set", "mir3d.p10_mode=original_quirk")
    cases = {c["case_id"]: c["metrics"] for c in res["cases"]}
    # per query (10 * P@10 + P@5) / 11: q1 group (3 + 2/5)/11, q2 (2 + 2/5)/11, k1 (1 + 1/5)/11
    assert cases["colon/q1"]["colon"]["group/p_at_10"] == pytest.approx((3 + 0.4) / 11)
    assert cases["colon/q2"]["colon"]["group/p_at_10"] == pytest.approx((2 + 0.4) / 11)
    assert cases["lung/k1"]["lung"]["group/p_at_10"] == pytest.approx((1 + 0.2) / 11)
    assert cases["colon/q1"]["colon"]["group/p_at_5"] == pytest.approx(0.4)  # other cut-offs unchanged
    assert res["config"]["mir3d"]["p10_mode"] == "original_quirk"


def test_jsonl_equals_csv_and_is_deterministic(toy, tmp_path: Path) -> None:
    gt, pred = toy
    jsonl = tmp_path / "rankings.jsonl"
    jsonl.write_text(
        "\n".join(json.dumps({"region": r, "query": q, "rank": k, "retrieved": v}) for r, q, k, v in RANKINGS) + "\n"
    )
    a = _run(gt, pred, tmp_path / "a")
    b = _run(gt, jsonl, tmp_path / "b")
    assert a["aggregates"] == b["aggregates"]
    _run(gt, pred, tmp_path / "c")
    assert (tmp_path / "a/results.json").read_bytes() == (tmp_path / "c/results.json").read_bytes()


def test_region_selection_and_leakage_audit(tmp_path: Path) -> None:
    gt = _toy_gt(tmp_path / "gt", colon_test=[*COLON_QUERIES, "i05"])  # i05: index AND query in colon
    pred = _rankings(tmp_path / "rankings.csv")
    res = _run(gt, pred, tmp_path / "out", "--set", "mir3d.regions=[colon]")
    assert res["summary"]["audit/n_query_index_overlap"] == 1
    assert res["summary"]["n_rows_ignored"] == 2 and res["summary"]["n_regions"] == 1
    assert any("leakage audit: colon: 1 volume(s)" in w and "i05" in w for w in res["warnings"])
    assert not any(k.endswith("/by_region/lung") for k in res["aggregates"])
    flat = json.loads((tmp_path / "out/metrics.json").read_text())
    assert flat["mir3d/audit/n_query_index_overlap"] == 1


# ---------------------------------------------------------------------------------------------------------------
# Validation: one line on stderr naming file, line and field; exit code 2
# ---------------------------------------------------------------------------------------------------------------

N = len(RANKINGS) + 2  # line number of an appended row (header is line 1)


@pytest.mark.parametrize(
    ("extra", "message", "field"),
    [
        ("brain,q1,11,i12,\n", f"line {N}: unknown region 'brain'", "region"),
        ("colon,i01,1,i02,\n", f"line {N}: query is not in the colon test split", "query"),
        ("colon,q1,11,zzz,\n", f"line {N}: retrieved volume 'zzz' is not in the colon index", "retrieved"),
        ("colon,q1,11,q2,\n", "it is a test query", "retrieved"),
        ("colon,q1,11,i01,\n", f"line {N}: 'i01' is retrieved twice for this query (also on line 2)", "retrieved"),
        ("colon,q1,11,q1,\n", f"line {N}: the query retrieves itself", "retrieved"),
        ("colon,q1,10,i12,\n", f"line {N}: rank 10 appears twice for this query (also on line 11)", "rank"),
        ("colon,q1,12,i12,\n", "ranks of this colon list are not 1..11: rank 11 is missing", "rank"),
        ("colon,q1,0,i12,\n", f"line {N}: rank must be >= 1", "rank"),
        ("colon,q1,x,i12,\n", f"line {N}: rank must be an integer", "rank"),
        ("colon,q1,11,i12,high\n", f"line {N}: score must be a number", "score"),
    ],
)
def test_ranking_validation(toy, tmp_path: Path, capsys, extra: str, message: str, field: str) -> None:
    gt, _ = toy
    pred = _rankings(tmp_path / "bad.csv", extra=extra)
    assert main(_argv(gt, pred, tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert message in err and f"field={field}" in err and f"file={pred}" in err
    assert not (tmp_path / "out").exists()


def test_bad_files(toy, tmp_path: Path, capsys) -> None:
    gt, pred = toy
    bad_header = tmp_path / "h.csv"
    bad_header.write_text("region,query,rank\ncolon,q1,1\n")
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text('{"region": "colon", "query": "q1", "rank": 1, "retrieved": "i01"}\n{"region": "colon"\n')
    cases = [
        (_argv(gt, bad_header, tmp_path / "o"), "missing required column(s) ['retrieved']"),
        (_argv(gt, jsonl, tmp_path / "o"), "malformed JSON on line 2"),
        (_argv(gt, tmp_path / "nope.csv", tmp_path / "o"), "file not found"),
        (_argv(tmp_path, pred, tmp_path / "o"), "no 3DMIR_labels/ folder"),
        (_argv(gt, pred, tmp_path / "o", "--set", "mir3d.regions=[brain]"), "region(s) ['brain'] not in the ground"),
        (_argv(gt, pred, tmp_path / "o", "--set", "mir3d.p10_mode=wrong"), "field mir3d.p10_mode"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("file", "edit", "message"),
    [
        ("Data_Splits/colon_full_test_split.csv", lambda t: t + "9,nolabel\r\n", "line 5: volume has no row"),
        ("Data_Splits/colon_full_train_split.csv", lambda t: t + "12,i01\r\n", "listed twice in the split"),
        (
            "3DMIR_labels/colon_labels_and_captions.csv",
            lambda t: t.replace(",2,1,", ",two,1,", 1),
            "data row 1: lesion_group must be an integer",
        ),
        ("Data_Splits/lung_full_test_split.csv", None, "file not found"),
    ],
)
def test_ground_truth_validation(toy, tmp_path: Path, capsys, file: str, edit, message: str) -> None:
    gt, pred = toy
    path = gt / file
    if edit is None:
        path.unlink()
    else:
        path.write_text(edit(path.read_text(encoding="utf-8-sig")), encoding="utf-8")
    assert main(_argv(gt, pred, tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert message in err and f"file={path}" in err
