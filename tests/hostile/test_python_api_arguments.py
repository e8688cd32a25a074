"""The Python API under careless arguments (issue 34): a wrong type is a ``TypeError`` naming the function, the
parameter and what it accepts, raised before anything is read or written (was ``AttributeError ... startswith``,
``ValueError: dictionary update sequence``, or a string iterated as overrides); a registry version number as an
int is a candidate, as the CLI's ``--candidate 2``; and messages raised from Python name keyword arguments
(``replace=True``, ``engine.workers=1``, overrides), the CLI's flags only under the CLI (:func:`trackeval.errors.
spoken`, switched by :func:`trackeval.errors.cli_caller` in ``trackeval.cli.main``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import trackeval
from trackeval.errors import ConfigError, InputError, WorkerDied, cli_caller


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder: a call refused at the boundary leaves it empty (no mlflow.db, no cache)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


CASES = [
    (
        lambda d: trackeval.evaluate("umd", str(d)),
        ("trackeval.evaluate(): inputs must be umd's inputs as a mapping", "'ground_truth': ...", "not str"),
    ),
    (lambda d: trackeval.evaluate(5, {}), ("trackeval.evaluate(): name must be a benchmark unit's name (str)",)),
    (lambda d: trackeval.evaluate("umd", {}, config={"umd": {}}), ("evaluate(): config must be the configuration",)),
    (lambda d: trackeval.evaluate("umd", {}, None, ("m", "v1")), ("evaluate(): model must be a mapping", "tuple")),
    (lambda d: trackeval.evaluate("umd", {}, None, {"name": 1}), ("evaluate(): model['name'] must be a str",)),
    (lambda d: trackeval.write_results({"a": 1}, d / "out"), ("write_results(): result must be the result",)),
    (lambda d: trackeval.verify(None), ("trackeval.verify(): model must be a registered model name (str), not None",)),
    (lambda d: trackeval.verify("m", config={"gate": {}}), ("verify(): config must be the configuration", "dict")),
    (lambda d: trackeval.promote(None, "v1"), ("trackeval.promote(): model must be a registered model name",)),
    (lambda d: trackeval.promote("m", True), ("promote(): candidate must be a version name (str) or a registry",)),
    (lambda d: trackeval.promote("m", 2.0), ("promote(): candidate must be", "not float 2.0")),
    (lambda d: trackeval.promote("m", "v1", dry_run="no"), ("promote(): dry_run must be True or False",)),
    (
        lambda d: trackeval.load_config(None, "engine.executor=local"),
        ("load_config(): overrides must be a list of 'key=value' strings", "a list of one", "not str"),
    ),
    (lambda d: trackeval.load_config(None, ["a=1", 2]), ("load_config(): overrides[1] must be a 'key=value' string",)),
    (lambda d: trackeval.load_config(5), ("load_config(): path must be a path (str or pathlib.Path)", "not int 5")),
    (lambda d: trackeval.track(None), ("trackeval.track(): results must be a result of trackeval.evaluate",)),
    (lambda d: trackeval.track([d, 5]), ("track(): results[1] must be",)),
    (lambda d: trackeval.track(d, replace="yes"), ("track(): replace must be True or False",)),
    (lambda d: trackeval.track(d, model=3), ("track(): model must be a registered model name (str), or None",)),
    (lambda d: trackeval.compare(1, "m@champion"), ("trackeval.compare(): a must be 'NAME@ALIAS'",)),
]


@pytest.mark.parametrize(("call", "needles"), CASES)
def test_wrong_argument_is_a_type_error_naming_it(here: Path, call, needles) -> None:
    with pytest.raises(TypeError) as raised:
        call(here)
    for needle in needles:
        assert needle in str(raised.value), (needle, str(raised.value))
    assert list(here.iterdir()) == []  # refused before any store, cache or output exists


def test_registry_version_number_as_int_is_a_candidate(here: Path) -> None:
    """`promote("m", 2)` reaches the registry (was AttributeError: 'int' object has no attribute 'startswith')."""
    cfg = trackeval.load_config(None, [f"tracking.uri=sqlite:///{here / 'mlflow.db'}", "tracking.backoff_s=0.05"])
    with pytest.raises(InputError, match="no registered model 'm'"):
        trackeval.promote("m", 2, config=cfg)


def test_messages_from_python_name_arguments_and_from_the_cli_flags(cli, here: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        trackeval.load_config(None, ["umd"])
    assert str(raised.value) == "override expects key=value, got 'umd'"
    with pytest.raises(ConfigError) as raised:
        trackeval.load_config(None, ["umd.labels={liver: 1, liver: 2}"])
    assert "override umd.labels: key 'umd.labels.liver' is repeated in the override;" in str(raised.value)
    assert "--set" not in str(raised.value)
    out = cli("evaluate", "umd", "--ground-truth", here, "--predictions", here, "--out", here / "o", "--set", "umd")
    out.one_line_error("--set expects key=value, got 'umd'")


def test_one_place_switches_the_wording() -> None:
    died = WorkerDied("a worker died: retry with --workers 1 (or fewer workers)", case_id="c--replace")
    refused = InputError("M/V has other results: track under a new version, or pass --replace (kept)", file="x")
    assert str(died) == "a worker died: retry with engine.workers=1 (or fewer workers) [case=c--replace]"
    assert str(refused) == "M/V has other results: track under a new version, or pass replace=True (kept) [file=x]"
    with cli_caller():
        assert str(died) == "a worker died: retry with --workers 1 (or fewer workers) [case=c--replace]"
        assert "or pass --replace (kept)" in str(refused)
    assert "pass model= and version=" in str(InputError("is empty: pass --model-name and --model-version"))
