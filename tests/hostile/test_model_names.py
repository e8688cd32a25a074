"""Model names and versions that need care in MLflow (filter strings, registry and LoggedModel names): each is
either refused up front (exit 2, one line naming ``model.name`` / ``model.version``, nothing written to the store)
or works end to end: track (twice: the second finds it), promote, compare.

MLflow's filter parser keeps the text between quotes as is (no unescaping) and its LoggedModel search takes single
quotes only, so a single quote cannot be searched for; ``/`` and ``:`` are not registered model names; ``@``
separates ``NAME@ALIAS``. Everything else must work, including what MLflow refuses in a LoggedModel's display
name (``.``, ``%``, ``"``, ``/``), which trackeval replaces there (the identity is in the tags). A trailing
backslash is refused too: MLflow's parser reads it as escaping the closing quote.
"""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from tests import test_tracking
from trackeval.io.results_folder import write_outputs
from trackeval.tracking.lineage import idempotency_key

migrated_db, store, evaluated = test_tracking.migrated_db, test_tracking.store, test_tracking.evaluated


def _named(evaluated, tmp_path, name: str, version: str):
    """The champion's results folder under another model name / version (results.json says so)."""
    result, _ = evaluated["champion"]
    result = result.model_copy(update={"model": {"name": name, "version": version}})
    folder = tmp_path / "named"
    write_outputs(result, folder)
    return result, folder


def _store_untouched(client: MlflowClient) -> None:
    assert client.search_registered_models() == []
    exp = client.get_experiment_by_name("trackeval")
    assert exp is None or client.search_runs([exp.experiment_id]) == []


REFUSED = [
    ("name", "a'b", "holds '"),
    ("name", "seg/v2", "holds /"),
    ("name", "a:b", "holds :"),
    ("name", "a@b", "holds @"),
    ("name", "", "is empty"),
    ("name", "   ", "is empty"),
    ("name", " seg", "whitespace"),
    ("name", "seg ", "whitespace"),
    ("name", "a\nb", "U+000A"),
    ("name", "a\tb", "U+0009"),
    ("name", "a\x00b", "U+0000"),
    ("name", "a\u2028b", "U+2028"),
    ("name", "a\u200bb", "U+200B"),
    ("name", ".", "relative path"),
    ("name", "..seg", "relative path"),
    ("name", "s" * 101, "101 characters"),
    ("version", "v'1", "holds '"),
    ("version", "v\\", "ends with a backslash"),
    ("name", "seg\\", "ends with a backslash"),
    ("version", "", "is empty"),
    ("version", "@v1", "alias"),
    ("version", "v\x1b[31m", "U+001B"),
    ("version", "v1\r", "U+000D"),
    ("version", "v" * 101, "101 characters"),
]


@pytest.mark.parametrize(("part", "value", "needle"), REFUSED, ids=[f"{p}-{v!r}" for p, v, _ in REFUSED])
def test_refused_in_results_json(cli, store, evaluated, tmp_path, part, value, needle):
    sets, client = store
    name, version = ("seg", "v1")
    _, folder = _named(evaluated, tmp_path, value if part == "name" else name, value if part == "version" else version)
    line = cli("track", folder, *sets).one_line_error(needle, f"field=model.{part}", f"file={folder / 'results.json'}")
    assert "\n" not in line and "\x1b" not in line.replace("\\x1b", "")
    _store_untouched(client)


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [
        ("--model-name", "a'b", "model.name"),
        ("--model-name", "x/y", "model.name"),
        ("--model-version", "@x", "model.version"),
    ],
)
def test_refused_as_option(cli, store, evaluated, option, value, field):
    sets, client = store
    _, folder = evaluated["champion"]
    cli("track", folder, option, value, *sets).one_line_error(f"field={field}")
    _store_untouched(client)


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["promote", "--model", "a'b", "--candidate", "v1"], "model.name"),
        (["promote", "--model", "seg", "--candidate", "v'1"], "model.version"),
        (["compare", "a'b/v1", "seg@champion"], "model.name"),
        (["compare", "seg/@champion", "seg/champion"], "model.version"),
        (["compare", "seg/v'1", "seg/champion"], "model.version"),
    ],
)
def test_refused_in_promote_and_compare_references(cli, store, evaluated, argv, field):
    sets, client = store
    assert cli("track", evaluated["champion"][1], *sets).rc == 0
    runs_before = len(client.search_runs([client.get_experiment_by_name("trackeval").experiment_id]))
    cli(*argv, *sets).one_line_error(f"field={field}")
    assert len(client.search_runs([client.get_experiment_by_name("trackeval").experiment_id])) == runs_before
    assert {k: str(v) for k, v in client.get_registered_model("seg").aliases.items()} == {"challenger": "1"}


WORKING = [
    ('a"b', "v1"),
    ("a\\b", "v1"),
    ("a b", "v1"),
    ("ségmentation-模型", "v1"),
    ("%", "v1"),
    ("_", "v1"),
    ("a`b", "v1"),
    ("seg", "seg/v2"),
    ("seg", "1.0"),
    ("seg", "v@1"),
    ("seg", "v\\2"),
    ("seg", "%_"),
    ("seg", 'v"2'),
    ("s" * 100, "v" * 100),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "version"), WORKING, ids=[f"{n[:12]!r}-{v[:12]!r}" for n, v in WORKING])
def test_works_end_to_end(cli, store, evaluated, tmp_path, name, version):
    sets, client = store
    result, folder = _named(evaluated, tmp_path, name, version)
    res = cli("track", folder, *sets)
    assert res.rc == 0 and "logged as run" in res.err, res.err
    assert "already tracked" in cli("track", folder, *sets).err  # found again: the filters match the name exactly
    assert cli("promote", "--model", name, "--candidate", version, *sets).rc == 0  # floors only: passes
    res = cli("compare", f"{name}/{version}", f"{name}@champion", *sets)
    assert res.rc == 0 and "umd/dsc" in res.out and "+0.0000" in res.out, res.err
    exp = client.get_experiment_by_name("trackeval").experiment_id
    key = idempotency_key(result)
    finished = client.search_runs(
        [exp], f"tags.`trackeval.idempotency_key` = '{key}' and attributes.status = 'FINISHED'"
    )
    assert len(finished) == 1 and finished[0].data.tags["trackeval.model_name"] == name
    (mv,) = client.search_model_versions(f"name = '{name}'") if "'" not in name else []
    assert (
        mv.tags["trackeval.model_version"] == version and mv.tags["trackeval.eval_run.umd"] == finished[0].info.run_id
    )
    assert {k: str(v) for k, v in client.get_registered_model(name).aliases.items()} == {"champion": str(mv.version)}
    (model,) = client.search_logged_models([exp])
    assert model.tags["trackeval.model_name"] == name and model.tags["trackeval.model_version"] == version


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [("--model-name", "a'b", "model.name"), ("--model-version", "@x", "model.version")],
)
def test_evaluate_track_refuses_the_name_before_evaluating(cli, umd_dataset, tmp_path, option, value, field):
    """``evaluate --track`` checks the name first: no evaluation is wasted and nothing is written."""
    from tests.conftest import umd_argv

    gt, pred = umd_dataset()
    out = tmp_path / "out"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    argv = umd_argv(gt, pred, out, "--track", "--model-name", "seg", "--model-version", "v1", option, value)
    cli(*argv, "--set", f"tracking.uri={uri}").one_line_error(f"field={field}")
    assert not out.exists()
    assert not (tmp_path / "mlflow.db").exists()
