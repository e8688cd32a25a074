"""Gate evidence cannot drift: a decision names the evaluation runs on both sides and is re-derived from them
(``promote --explain``); re-pointing a version at an evaluation on other ground truth is refused without
``--replace``, and a replaced evaluation is kept (embedded SQLite store, real results folders)."""

from __future__ import annotations

from pathlib import Path

from tests import gate_data
from tests.test_tracking import evaluated, migrated_db, store  # noqa: F401 - shared fixtures
from trackeval.cli import main


def _tracked_and_promoted(sets: list[str], evaluated: dict) -> None:  # noqa: F811
    for version in ("champion", "improved"):
        assert main(["track", str(evaluated[version][1]), *sets]) == 0
    for version in ("champion", "improved"):
        assert main(["promote", "--model", "seg", "--candidate", version, *sets]) == 0


def _version(client, version: str):
    return next(v for v in client.search_model_versions("name = 'seg'") if v.tags["trackeval.model_version"] == version)


def test_explain_reproduces_a_decision_and_detects_changed_evidence(store, evaluated, tmp_path, capsys):  # noqa: F811
    sets, client = store
    _tracked_and_promoted(sets, evaluated)
    improved = _version(client, "improved")
    decision_run = improved.tags["trackeval.gate.decision_run"]
    capsys.readouterr()
    assert main(["promote", "--explain", decision_run, *sets]) == 0
    out = capsys.readouterr()
    assert "reproduced exactly" in out.err and "umd/dsc" in out.out

    # someone overwrites the champion's evaluation artifact: the recorded decision no longer follows from it
    champion_run = _version(client, "champion").tags["trackeval.eval_run.umd"]
    tampered = tmp_path / "tampered" / "results.json"
    tampered.parent.mkdir()
    tampered.write_text(
        (evaluated["organ_regress"][1] / "results.json").read_text().replace('"organ_regress"', '"champion"')
    )
    client.log_artifact(champion_run, str(tampered))
    # results.json's digests cover its case table: alone, the swap is refused as a mixed set (exit 2)...
    assert main(["promote", "--explain", decision_run, *sets]) == 2
    assert "cases.parquet" in capsys.readouterr().err
    # ...and with the table it describes, a consistent forgery: the recorded decision does not follow from it
    cases = tmp_path / "tampered" / "cases.parquet"
    cases.write_bytes((evaluated["organ_regress"][1] / "cases.parquet").read_bytes())
    client.log_artifact(champion_run, str(cases))
    assert main(["promote", "--explain", decision_run, *sets]) == 1
    assert "NOT reproduced" in capsys.readouterr().err

    assert main(["promote", "--explain", champion_run, *sets]) == 2  # not a decision run
    assert "not a trackeval gate decision run" in capsys.readouterr().err
    assert main(["promote", "--model", "seg", *sets]) == 2
    assert "promote needs --candidate" in capsys.readouterr().err


def test_repointing_a_champion_to_other_data_needs_replace(store, evaluated, tmp_path, capsys):  # noqa: F811
    sets, client = store
    _tracked_and_promoted(sets, evaluated)
    improved = _version(client, "improved")
    old_run = improved.tags["trackeval.eval_run.umd"]
    decision = client.get_run(improved.tags["trackeval.gate.decision_run"])
    recorded_runs = decision.data.params["candidate_runs"]
    assert recorded_runs == f"umd={old_run}"

    alt = gate_data.make_ground_truth(tmp_path / "alt", altered=True)
    _, folder = gate_data.evaluate_version(tmp_path / "alt", alt, "improved", gate_data.config())
    capsys.readouterr()
    assert main(["track", str(folder), *sets]) == 2
    err = capsys.readouterr().err
    assert "seg/improved was evaluated on umd with other ground truth" in err and "--replace" in err
    assert "field=ground_truth_digest" in err and str(Path(folder) / "results.json") in err
    assert _version(client, "improved").tags["trackeval.eval_run.umd"] == old_run  # nothing moved

    assert main(["track", str(folder), "--replace", *sets]) == 0
    new_run = _version(client, "improved").tags["trackeval.eval_run.umd"]
    assert new_run != old_run
    assert client.get_run(new_run).data.tags["trackeval.replaces"] == old_run
    assert client.get_run(old_run).info.status == "FINISHED"  # kept, not deleted
    # the recorded decision still names (and is re-derived from) the runs it was made on
    assert client.get_run(decision.info.run_id).data.params["candidate_runs"] == recorded_runs
    assert main(["promote", "--explain", decision.info.run_id, *sets]) == 0


def test_pairing_compares_only_the_config_fields_that_change_the_metric(tmp_path):
    """An NSD tolerance or a training manifest (audit only) does not block pairing on Dice; the empty policy does.
    The full config digest still differs (and is still logged)."""
    from trackeval.api import gate_policies
    from trackeval.gate.decide import compare_unit

    gt = gate_data.make_ground_truth(tmp_path)
    base_cfg = gate_data.config()
    base, _ = gate_data.evaluate_version(tmp_path, gt, "champion", base_cfg)
    tolerant, _ = gate_data.evaluate_version(
        tmp_path, gt, "improved", gate_data.config("umd.nsd_tolerance_mm=3"), model_version="tol"
    )
    relabelled, _ = gate_data.evaluate_version(
        tmp_path, gt, "improved", gate_data.config("umd.empty_both=perfect"), model_version="lab"
    )
    policy = gate_policies(base_cfg)["umd"]
    assert policy.protocol == ("umd.labels", "umd.empty_both", "umd.missing_prediction")
    assert tolerant.config_digest != base.config_digest
    paired = compare_unit(tolerant, base, policy, base_cfg.gate, ("tol", "champion"))
    assert paired.problems == [] and paired.rows[0].key == "umd/dsc"
    assert paired.protocol_digest and paired.data_digest == base.data.ground_truth_digest
    refused = compare_unit(relabelled, base, policy, base_cfg.gate, ("lab", "champion"))
    assert refused.rows == []
    assert refused.problems[0] == (
        'protocol config differs: umd.empty_both is "perfect" in the candidate, "nan" in the baseline; '
        "re-evaluate with the same config"
    )
    # a gate config that picks another primary metric compares the whole protocol config
    other = gate_policies(gate_data.config("gate.primary_metrics={umd: nsd}"))["umd"]
    assert other.protocol is None
    assert compare_unit(tolerant, base, other, base_cfg.gate, ("t", "c")).problems[0] == (
        "protocol config differs: umd.nsd_tolerance_mm is 3.0 in the candidate, 1.0 in the baseline; "
        "re-evaluate with the same config"
    )
