"""Results folders written before the columnar contract (schema 1.2: the case records inline in results.json) are
still read, tracked and gated, with the same numbers as today's evaluation of the same files.

``tests/fixtures/results_v1/{champion,improved}`` were written by trackeval 0.2.0 at the last schema-1.2 commit
from the ``tests.gate_data`` UMD dataset (the ``champion`` and ``improved`` versions, ``engine.cache=false``);
the same dataset is rebuilt here (deterministic NIfTI files) and evaluated by this trackeval.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.hostile.test_evidence import versions  # noqa: F401 - shared fixture: today's folders of the dataset
from tests.test_tracking import evaluated, migrated_db, store  # noqa: F401 - shared fixtures
from trackeval.cli import main
from trackeval.config import GateConfig
from trackeval.gate.decide import compare_unit
from trackeval.gate.policy import resolve_policies
from trackeval.io.results_folder import CASES_PARQUET, RESULTS_JSON, has_case_table, read_results
from trackeval.registry import units

V1 = Path(__file__).parent / "fixtures" / "results_v1"


def _numbers(result) -> tuple:
    """Everything numeric a result holds: aggregates, case records, counts and data digests."""
    return (
        {k: s.model_dump() for k, s in result.aggregates.items()},
        [c.model_dump() for c in result.cases],
        result.summary,
        result.data.model_dump(),
    )


@pytest.mark.parametrize("version", ["champion", "improved"])
def test_a_schema_1_folder_reads_with_todays_numbers(versions, version):  # noqa: F811
    old = read_results(V1 / version)
    assert json.loads((V1 / version / RESULTS_JSON).read_text())["schema_version"] == "1.2"
    new = read_results(versions[version])
    assert old.schema_version == "1.2" and new.schema_version.startswith("2.")
    assert _numbers(old) == _numbers(new)  # byte-identical numbers before and after the columnar contract
    assert read_results(V1 / version / RESULTS_JSON).aggregates == old.aggregates  # a lone 1.x results.json


def test_a_schema_1_cases_parquet_is_still_checked_against_the_records(tmp_path):
    folder = tmp_path / "champion"
    shutil.copytree(V1 / "champion", folder)
    other = (V1 / "improved" / CASES_PARQUET).read_bytes()
    (folder / CASES_PARQUET).write_bytes(other)
    with pytest.raises(Exception, match="where the case records give") as err:
        read_results(folder)
    assert err.value.file == str(folder / CASES_PARQUET)


def test_the_gate_pairs_a_schema_1_champion_with_a_schema_2_candidate(versions):  # noqa: F811
    """The comparison of an old champion folder with a new candidate is the one of two new folders."""
    gate = GateConfig(n_resamples=500)
    policy = resolve_policies(gate, units().values())["umd"]
    mixed = compare_unit(read_results(versions["improved"]), read_results(V1 / "champion"), policy, gate, ("b", "a"))
    new = compare_unit(read_results(versions["improved"]), read_results(versions["champion"]), policy, gate, ("b", "a"))
    assert mixed.problems == [] and mixed.model_dump() == new.model_dump()


def test_schema_1_folders_are_tracked_and_promoted(store, tmp_path):  # noqa: F811
    sets, client = store
    for version in ("champion", "improved"):
        folder = shutil.copytree(V1 / version, tmp_path / version)
        assert main(["track", str(folder), *sets]) == 0
    for version in ("champion", "improved"):
        assert main(["promote", "--model", "seg", "--candidate", version, *sets]) == 0
    assert client.get_model_version_by_alias("seg", "champion").tags["trackeval.model_version"] == "improved"


def test_the_schema_is_read_from_results_jsons_own_field(versions, tmp_path):  # noqa: F811
    """Whether a case table belongs beside a results.json (what tracking downloads with it) is its top-level
    ``schema_version``, never a case group that happens to be named so (1.x holds the records inline)."""
    doc = json.loads((V1 / "champion" / RESULTS_JSON).read_text())
    doc["cases"][0]["groups"]["schema_version"] = "2.0"  # text a textual search would take for the version
    lone = tmp_path / RESULTS_JSON
    lone.write_text(json.dumps(doc, sort_keys=True))
    assert not has_case_table(lone) and not has_case_table(V1 / "improved" / RESULTS_JSON)
    assert has_case_table(versions["champion"] / RESULTS_JSON)
