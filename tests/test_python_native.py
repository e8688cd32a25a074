"""The Python-native surface: every documented exception in ``trackeval.errors``; messages that name the Python
API's parameters (``replace=True``), never a temporary folder; ``promote`` idempotent on the same evidence;
``to_frame()`` of a result, a comparison and a decision, their ``_repr_html_``; MLflow's INFO lines kept off a
Python caller's terminal as off the CLI's. Real UMD evaluations (``tests.gate_data``) on a real MLflow SQLite
store."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

import trackeval
from tests import gate_data
from tests.conftest import scaled
from trackeval import errors
from trackeval.cli import main
from trackeval.errors import InputError, TrackevalError, TrackingError
from trackeval.gate.compare import BenchmarkComparison
from trackeval.gate.decide import decide
from trackeval.gate.policy import resolve_policies
from trackeval.registry import units

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTED = {"TrackevalError", "InputError", "ConfigError", "OutputError", "TrackingError", "WorkerDied"}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Results (and folders) of three versions of model ``seg`` on one ground truth."""
    root = tmp_path_factory.mktemp("native")
    cfg = gate_data.config()
    gt = gate_data.make_ground_truth(root)
    out: dict = {"root": root}
    for version in ("champion", "improved", "noise"):
        out[version] = gate_data.evaluate_version(root, gt, version, cfg)
    return out


@pytest.fixture(scope="module")
def migrated_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite database with every migration applied (copied per test: migrations are slow)."""
    path = tmp_path_factory.mktemp("mlflowdb") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def store(tmp_path: Path, migrated_db: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], MlflowClient]:
    """A fresh store: the ``key=value`` overrides that name it, and a client."""
    shutil.copy(migrated_db, tmp_path / "mlflow.db")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sets = [
        f"tracking.uri={uri}",
        f"tracking.artifact_location={tmp_path / 'mlartifacts'}",
        f"tracking.dvc_root={tmp_path}",
        "tracking.backoff_s=0.05",
    ]
    return sets, MlflowClient(tracking_uri=uri, registry_uri=uri)


def _cli_sets(sets: list[str]) -> list[str]:
    return [a for s in [*gate_data.OVERRIDES, *sets] for a in ("--set", s)]


# --- trackeval.errors ---------------------------------------------------------------------------------------------


def test_errors_exports_every_exception_the_docs_name() -> None:
    texts = [p.read_text(encoding="utf-8") for p in [*ROOT.glob("docs/**/*.md"), ROOT / "README.md"]]
    texts.append((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    qualified = {m for t in texts for m in re.findall(r"trackeval\.errors\.(\w+)", t)}
    assert qualified <= set(errors.__all__), qualified - set(errors.__all__)
    assert DOCUMENTED <= set(errors.__all__)
    for name in DOCUMENTED:
        cls = getattr(errors, name)
        assert issubclass(cls, TrackevalError) and cls.__doc__, name
    assert issubclass(errors.WorkerDied, InputError)


# --- to_frame and _repr_html_ --------------------------------------------------------------------------------------


def test_result_to_frame_is_one_row_per_case_and_item_as_cases_parquet(evaluated: dict) -> None:
    result, folder = evaluated["champion"]
    frame = result.to_frame()
    assert len(frame) == sum(len(c.metrics) for c in result.cases) == 12 * 3
    assert list(frame.columns[:6]) == ["case_id", "subject_id", "status", "message", "modality", "organ"]
    assert {"dsc", "iou", "hd95", "nsd"} <= set(frame.columns) and frame["dsc"].dtype == "float64"
    for case in result.cases:
        for organ, metrics in case.metrics.items():
            (row,) = frame[(frame.case_id == case.case_id) & (frame.organ == organ)].itertuples()
            assert (row.subject_id, row.modality) == (case.subject_id, case.groups["modality"])
            for metric, value in metrics.items():
                got = getattr(row, metric)
                assert (math.isnan(got) and value is None) or got == value, (case.case_id, organ, metric)
    # hand-computed: liver boxes 6 + s % 3 voxels wide, shifted by 2 -> Dice (4 + d) / (6 + d); heart not shifted
    liver = frame[frame.organ == "liver"].set_index("case_id")["dsc"]
    assert liver["s0_ct"] == pytest.approx(4 / 6) and liver["s1_pet"] == pytest.approx(5 / 7)
    assert liver["s2_ct"] == pytest.approx(6 / 8)
    assert (frame[frame.organ == "heart"]["dsc"] == 1.0).all()
    pd.testing.assert_frame_equal(frame, pd.read_parquet(folder / "cases.parquet"))


def _decision(evaluated: dict, model: str = "seg", candidate: str = "improved"):
    cfg = gate_data.config()
    policies = resolve_policies(cfg.gate, units().values())
    cand, base = evaluated["improved"][0], evaluated["champion"][0]
    return decide(model, candidate, {"umd": cand}, "champion", {"umd": base}, cfg.gate, policies)


def test_comparison_and_decision_frames_hold_the_rows_and_group_tests(evaluated: dict) -> None:
    decision = _decision(evaluated)
    (comparison,) = decision.comparisons
    frame = comparison.to_frame()
    assert len(frame) == len(comparison.rows) and frame.attrs["metric"] == "umd/dsc"
    head = frame.iloc[0]
    assert (head.unit, head.key, head.dimension, head.group) == ("umd", "umd/dsc", "", "")
    cand, base = evaluated["improved"][0].aggregates["umd/dsc"], evaluated["champion"][0].aggregates["umd/dsc"]
    assert head.candidate == pytest.approx(cand.value) and head.baseline == pytest.approx(base.value)
    assert head.delta == pytest.approx(cand.value - base.value) and head.ci95_low <= head.delta <= head.ci95_high
    liver = frame[(frame.dimension == "organ") & (frame.group == "liver")].iloc[0]
    assert liver.candidate == 1.0 and liver.delta > 0
    assert frame[["candidate", "delta", "std_error", "df"]].dtypes.eq("float64").all()
    assert frame.std_error.isna().all()  # the bootstrap has no standard error

    whole = decision.to_frame()
    assert len(whole) == len(comparison.rows) and whole.attrs["verdict"] == decision.verdict == "pass"
    assert whole.iloc[0][["margin", "p_value"]].isna().all() and whole.iloc[0].passed is None
    for test in decision.group_tests:
        (row,) = whole[whole.key == test.key].itertuples()
        assert (row.margin, row.p_value, row.p_adjusted, row.passed) == (
            test.margin,
            test.p_value,
            test.p_adjusted,
            test.passed,
        )
    assert len(decision.group_tests) == len(whole) - 1


def test_repr_html_escapes_every_value_and_is_well_formed(evaluated: dict) -> None:
    decision = _decision(evaluated, model="<script>alert(1)</script>", candidate='v"2&<b>')
    page = decision._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "v&quot;2&amp;&lt;b&gt;" in page and "PASS" in page
    ET.fromstring(page)  # a well-formed fragment: every tag closed, every value an entity-escaped text
    assert page.count("<table>") == 3  # the checks, the worst-group tests, the comparison
    assert "organ=liver" in page and "1.0000" in page
    refused = BenchmarkComparison(
        unit="umd",
        metric="umd/dsc",
        candidate_label="<i>a</i>",
        baseline_label="b",
        n_cases=2,
        problems=["case <img src=x> is missing"],
        rows=[],
    )
    fragment = refused._repr_html_()
    ET.fromstring(fragment)
    assert "<img" not in fragment and "cannot pair: case &lt;img src=x&gt; is missing" in fragment
    assert refused.to_frame().empty and refused.to_frame().attrs["problems"] == ["case <img src=x> is missing"]


# --- promote: idempotent in Python, refused in the CLI -------------------------------------------------------------


def _gate_runs(client: MlflowClient) -> int:
    experiments = [e.experiment_id for e in client.search_experiments()]
    return len(client.search_runs(experiments, "tags.`trackeval.kind` = 'gate'"))


def test_promote_of_the_champion_returns_the_recorded_decision(
    evaluated: dict, store: tuple[list[str], MlflowClient], capsys: pytest.CaptureFixture
) -> None:
    sets, client = store
    cfg = gate_data.config(*sets)
    for version in ("champion", "improved", "noise"):
        trackeval.track(evaluated[version][1], config=cfg)
    assert trackeval.promote("seg", "champion", config=cfg).verdict == "pass"
    first = trackeval.promote("seg", "improved", config=cfg)
    assert first.verdict == "pass" and first.champion == "champion"
    runs, aliases = _gate_runs(client), dict(client.get_registered_model("seg").aliases)
    again = trackeval.promote("seg", "improved", config=cfg)  # a notebook run twice
    # the decision as recorded (decision.json): the same, but for the bootstrap replicates kept in memory only
    assert again.model_dump(mode="json") == first.model_dump(mode="json") and again.candidate_evidence != {}
    assert _gate_runs(client) == runs and client.get_registered_model("seg").aliases == aliases
    by_number = trackeval.promote("seg", 2, config=cfg)  # by registry number, as --candidate 2
    assert by_number.model_dump(mode="json") == first.model_dump(mode="json")
    # the CLI keeps its answer (exit 2)
    assert main(["promote", "--model", "seg", "--candidate", "improved", *_cli_sets(sets)]) == 2
    assert "version 2 of 'seg' is already the champion [field=candidate]" in capsys.readouterr().err
    # a champion set outside the gate has no decision to return: refused, as before
    client.set_registered_model_alias("seg", "champion", "3")
    with pytest.raises(InputError, match="version 3 of 'seg' is already the champion"):
        trackeval.promote("seg", "noise", config=cfg)
    assert _gate_runs(client) == runs


# --- messages in Python's words ------------------------------------------------------------------------------------


def test_refusals_name_python_parameters_and_no_temporary_folder(
    evaluated: dict, store: tuple[list[str], MlflowClient], capsys: pytest.CaptureFixture
) -> None:
    sets, _ = store
    cfg = gate_data.config(*sets)
    trackeval.track(evaluated["champion"][0], config=cfg)  # a result object: written to a temporary folder
    other = evaluated["improved"][0].model_copy(update={"model": {"name": "seg", "version": "champion"}})
    with pytest.raises(InputError) as refused:
        trackeval.track(other, config=cfg)
    text = str(refused.value)
    assert "Track under a new model version, or pass replace=True (the previous" in text
    assert "--replace" not in text and "trackeval-results-" not in text and "result_0" not in text
    assert refused.value.file is None and refused.value.field == "results_digest"
    assert text.endswith("[field=results_digest]") and "trackeval-results-" not in repr(refused.value)
    with pytest.raises(InputError, match="has no tracked version 'v9'; track a version first \\(trackeval.track\\)"):
        trackeval.promote("seg", "v9", config=cfg)
    # the CLI's words are unchanged
    folder = evaluated["improved"][1]
    assert main(["track", str(folder), "--model-version", "champion", *_cli_sets(sets)]) == 2
    err = capsys.readouterr().err
    assert "or pass --replace (the previous" in err and f"file={folder / 'results.json'}" in err
    assert main(["promote", "--model", "seg", "--candidate", "v9", *_cli_sets(sets)]) == 2
    assert "has no tracked version 'v9'; run `trackeval track` first" in capsys.readouterr().err


def test_a_tracking_failure_says_how_to_finish_in_the_callers_words(evaluated: dict, tmp_path: Path) -> None:
    """A server that does not answer (a closed port on loopback): the retry hint is a Python call, not a command
    line naming a temporary folder."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    sets = [f"tracking.uri=http://127.0.0.1:{port}", "tracking.retries=0", "tracking.http_timeout_s=2"]
    cfg = gate_data.config(*sets, f"tracking.dvc_root={tmp_path}")
    with pytest.raises(TrackingError) as failed:
        trackeval.track(evaluated["champion"][0], config=cfg)
    assert "call trackeval.track again with the same results to finish (it completes what is missing)" in str(
        failed.value
    )
    assert "trackeval-results-" not in str(failed.value) and "`trackeval track" not in str(failed.value)


# --- MLflow's log lines --------------------------------------------------------------------------------------------


def test_python_calls_keep_mlflow_info_lines_off_the_terminal(evaluated: dict, tmp_path: Path) -> None:
    """A new process (MLflow configures its loggers when imported): ``trackeval.track`` on a fresh SQLite store
    prints none of the migrations' INFO lines; the same lines show for the caller's own MLflow code afterwards
    (its loggers' levels are restored). ``TRACKEVAL_DEBUG=1`` shows them as ``--debug`` does (one mechanism,
    ``errors.log_levels``: tests/test_tracking.py checks the CLI's)."""
    folder = evaluated["champion"][1]
    code = textwrap.dedent(
        f"""
        import logging, sys
        import trackeval
        from mlflow import MlflowClient
        from tests import gate_data
        cfg = gate_data.config("tracking.uri=sqlite:///{tmp_path}/" + sys.argv[1], "tracking.dvc_root={tmp_path}",
                               "tracking.artifact_location={tmp_path}/art")
        (tracked,) = trackeval.track({str(folder)!r}, config=cfg)
        print("tracked", tracked.logged, logging.getLogger("mlflow").level, file=sys.stderr, flush=True)
        if sys.argv[2] == "mine":
            MlflowClient(tracking_uri="sqlite:///{tmp_path}/mine.db").search_experiments()
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "TRACKEVAL_"))}

    def run(db: str, then: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, db, then],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=scaled(300),
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    quiet = run("quiet.db", "mine")
    before, _, after = quiet.partition("tracked True 20")  # logging.INFO: MLflow's own level, restored
    assert after, quiet
    assert "INFO" not in before and "alembic" not in before, before
    assert "INFO mlflow.store.db.utils: Creating initial MLflow database tables" in after  # the caller's own
