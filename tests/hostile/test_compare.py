"""``trackeval compare`` refuses what it cannot pair: a missing version, model or alias, a reference it cannot
read, a version without evaluations, results of other ground truth, protocol or case set, and results without a
single paired case. Each exits 2 with one line naming the field (the unit's metric when results do not pair);
nothing is written to the MLflow store, and a ``--markdown`` file still shows what could not be paired."""

from __future__ import annotations

import csv
import math
import shutil

import pytest
from mlflow import MlflowClient

from tests import gate_data, test_tracking
from tests.conftest import write_manifest
from trackeval.api import gate_policies, load_config
from trackeval.gate.compare import compare_results
from trackeval.gate.decide import decide

migrated_db, store, evaluated = test_tracking.migrated_db, test_tracking.store, test_tracking.evaluated


@pytest.fixture(scope="module")
def unpairable(evaluated, tmp_path_factory) -> dict:
    """Results folders that cannot be paired with the champion's: other ground truth, protocol, case set."""
    root = tmp_path_factory.mktemp("unpairable")
    out = {}
    gt = gate_data.make_ground_truth(root / "altered", altered=True)
    out["ground truth"] = gate_data.evaluate_version(root / "altered", gt, "champion", gate_data.config())[1]
    out["protocol"] = gate_data.evaluate_version(
        root / "protocol", evaluated["gt"], "champion", gate_data.config("umd.empty_both=perfect")
    )[1]
    fewer = root / "fewer" / "gt"
    shutil.copytree(evaluated["gt"], fewer)
    with (fewer / "manifest.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["subject_id"] != "s5"]
    write_manifest(fewer / "manifest.csv", rows)
    for case in ("s5_ct", "s5_pet"):
        (fewer / f"{case}.nii.gz").unlink()
    out["case set"] = gate_data.evaluate_version(root / "fewer", fewer, "champion", gate_data.config())[1]
    return out


def _store_state(client: MlflowClient) -> tuple[int, dict[str, str]]:
    exp = client.get_experiment_by_name("trackeval").experiment_id
    return len(client.search_runs([exp])), {k: str(v) for k, v in client.get_registered_model("seg").aliases.items()}


@pytest.fixture
def tracked(cli, store, evaluated):
    """``seg/champion`` tracked (challenger) and a registered ``seg/bare`` without any evaluation."""
    sets, client = store
    assert cli("track", evaluated["champion"][1], *sets).rc == 0
    client.create_model_version("seg", "file:///nowhere", tags={"trackeval.model_version": "bare"})
    return sets, client


REFS = [
    ("seg/nope", "seg/champion", "has no tracked version 'nope'", "field=version"),
    ("seg/champion", "seg@nope", "has no alias 'nope'", "field=alias"),
    ("ghost/v1", "seg/champion", "no registered model 'ghost'; run `trackeval track` first", "field=model"),
    ("sge/champion", "seg/champion", "no registered model 'sge' (did you mean 'seg'?)", "field=model"),
    ("seg/champion", "seeg@champion", "no registered model 'seeg' (did you mean 'seg'?)", "field=model"),
    ("justaname", "seg/champion", "cannot resolve 'justaname'", "field=ref"),
    ("seg/bare", "seg/champion", "seg/bare has no evaluation", "field=ref"),
    ("0123456789abcdef0123456789abcdef", "seg/champion", "MLflow refused", "0123456789abcdef0123456789abcdef"),
]


@pytest.mark.parametrize(("a", "b", "needle", "where"), REFS, ids=[r[0] + " vs " + r[1] for r in REFS])
def test_unresolvable_reference(cli, tracked, a, b, needle, where):
    sets, client = tracked
    before = _store_state(client)
    cli("compare", a, b, *sets).one_line_error(needle, where)
    assert _store_state(client) == before == (2, {"challenger": "1"})


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("ground truth", "data digest mismatch"),
        ("protocol", "protocol config differs"),
        ("case set", "case sets differ: 0 case(s) only in the candidate [], 2 only in the baseline"),
    ],
)
def test_results_that_do_not_pair(cli, tracked, evaluated, unpairable, tmp_path, case, needle):
    sets, client = tracked
    before = _store_state(client)
    md = tmp_path / "cmp.md"
    res = cli("compare", unpairable[case], "seg/champion", "--markdown", md, *sets)
    res.one_line_error("cannot pair", "on umd", needle, "field=umd/dsc")
    assert "cannot pair" in res.out  # the table says so too
    assert f"- cannot pair: {needle}" in md.read_text()
    assert _store_state(client) == before


def test_headline_its_records_do_not_give_is_a_pairing_problem(evaluated):
    """Every case's Dice NaN on one side while its headline still says 0.75: the gate compares only numbers that
    the case records reproduce, so it refuses, naming the key."""
    result, _ = evaluated["champion"]
    cases = [
        c.model_copy(update={"metrics": {i: {**m, "dsc": math.nan} for i, m in c.metrics.items()}})
        for c in result.cases
    ]
    empty = result.model_copy(update={"cases": cases})
    comp = compare_results(empty, result, gate_policies(load_config())["umd"], ("organ",))
    assert comp.rows == [] and len(comp.problems) == 1
    assert (
        comp.problems[0].startswith("the candidate's umd/dsc = ")
        and "not what its case records give (nan)" in (comp.problems[0])
    )
    cfg = gate_data.config()
    decision = decide("seg", "empty", {"umd": empty}, "champion", {"umd": result}, cfg.gate, gate_policies(cfg))
    assert decision.verdict == "fail"
    assert any(c.name == "pairing" and "not what its case records give" in c.detail for c in decision.checks)


def test_comparing_an_evaluation_with_itself_is_said(cli, evaluated, tmp_path, caplog):
    """``compare A B`` where both hold the same results (a version against ``@champion`` once it is the champion,
    or a folder with itself) prints the table of zeros with a warning saying so."""
    db = tmp_path / "mlflow.db"
    folder = evaluated["champion"][1]
    with caplog.at_level("WARNING", logger="trackeval.tracking.evidence"):
        assert cli("compare", folder, folder, "--set", f"tracking.uri=sqlite:///{db}").rc == 0
    assert "hold the same evaluation (the same results): every delta is 0" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="trackeval.tracking.evidence"):
        assert cli("compare", evaluated["improved"][1], folder, "--set", f"tracking.uri=sqlite:///{db}").rc == 0
    assert "hold the same evaluation" not in caplog.text
