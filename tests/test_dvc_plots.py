"""DVC plots keep the uncertainty: trackeval's Vega-Lite templates, as ``trackeval init`` installs them in a
repository, rendered by real ``dvc plots show --json``: whiskers on bars, a band on lines and the readers' points on
the ROC, with the CI fields of every plot CSV in the data DVC fills in. The demo's dvc.yaml uses the same files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO, scaled
from trackeval.pipeline.init import PLOT_TEMPLATES, TEMPLATES
from trackeval.pipeline.stages import READERS_CSV, write_plot

BIN = Path(sys.executable).parent


def _run(cwd: Path, *cmd: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "TRACKEVAL_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, f"{' '.join(cmd)}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return done.stdout


def _csvs(repo: Path) -> None:
    """Plot CSVs of two versions as the evaluate stage writes them (umd bars, imis line, xray/cls ROC + readers)."""
    for v, shift in (("v1", 0.0), ("v2", 0.05)):
        out = repo / "work" / "eval"
        rows = [
            {"organ": o, "value": 0.8 + shift, "ci95_low": 0.7 + shift, "ci95_high": 0.9} for o in ("liver", "heart")
        ]
        write_plot(out / "umd" / v / "plot.csv", rows)
        clicks = [
            {"click": k, "value": 0.5 + 0.1 * k, "ci95_low": 0.4 + 0.1 * k, "ci95_high": 0.6 + 0.1 * k} for k in (1, 2)
        ]
        write_plot(out / "imis" / v / "plot.csv", clicks)
        roc = [{"fpr": f, "tpr": t, "threshold": 1 - f} for f, t in ((0.0, 0.0), (0.2, 0.7 + shift), (1.0, 1.0))]
        write_plot(out / "xray_cls" / v / "plot.csv", roc)
        reader = {"reader": "rad1", "finding": "edema", "fpr": 0.3, "tpr": 0.6, "fpr_low": 0.2, "fpr_high": 0.4,
                  "tpr_low": 0.5, "tpr_high": 0.7}  # fmt: skip
        write_plot(out / "xray_cls" / v / "plots" / READERS_CSV, [reader])


def _layers(content: dict) -> list[dict]:
    return content.get("layer") or content["spec"]["layer"]


def test_init_templates_rendered_by_dvc_plots_show(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _run(repo, "git", "init", "-q")
    _run(repo, str(BIN / "dvc"), "init", "-q")
    _run(repo, str(BIN / "trackeval"), "init", "--unit", "umd", "--unit", "imis", "--unit", "xray/cls", "--model", "m")
    for template in TEMPLATES.glob("*.json"):
        assert (repo / ".dvc" / "plots" / template.name).read_text() == template.read_text()
    dvc_yaml = yaml.safe_load((repo / "dvc.yaml").read_text())
    plots = {k: v for d in dvc_yaml["plots"] for k, v in d.items()}
    assert plots["trackeval_umd"]["template"] == "trackeval_bars_ci" and plots["trackeval_umd"]["y"] == {
        "work/eval/umd/v1/plot.csv": "organ",
        "work/eval/umd/v2/plot.csv": "organ",
    }
    # with --readers, the readers' points go on the ROC plot (docs/own-pipeline.md)
    plots["trackeval_xray_cls"]["y"] |= {f"work/eval/xray_cls/{v}/plots/{READERS_CSV}": "tpr" for v in ("v1", "v2")}
    (repo / "dvc.yaml").write_text(yaml.safe_dump(dvc_yaml, sort_keys=False))
    _csvs(repo)
    shown = json.loads(_run(repo, str(BIN / "dvc"), "plots", "show", "--json"))
    assert not shown.get("errors"), shown["errors"]

    bars = shown["data"]["trackeval_umd"][0]["content"]
    rule = [layer for layer in _layers(bars) if layer["mark"]["type"] == "rule"][0]["encoding"]
    assert (rule["x"]["field"], rule["x2"]["field"]) == ("ci95_low", "ci95_high")  # the CI as a whisker
    values = bars["data"]["values"]
    assert {(r["filename"], r["organ"], r["ci95_low"]) for r in values} >= {("v1/plot.csv", "liver", "0.700000")}
    assert bars["encoding"]["color"]["field"] == "version" and bars["transform"][0]["as"] == "version"

    line = shown["data"]["trackeval_imis"][0]["content"]
    band = [layer for layer in _layers(line) if layer["mark"]["type"] == "area"][0]["encoding"]
    assert (band["y"]["field"], band["y2"]["field"]) == ("ci95_low", "ci95_high")  # the CI as a band
    assert {r["ci95_high"] for r in line["data"]["values"]} == {"0.700000", "0.800000"}

    roc = shown["data"]["trackeval_xray_cls"][0]["content"]
    points = [layer for layer in _layers(roc) if layer["mark"]["type"] == "point"][0]
    assert points["transform"] == [{"filter": "isValid(datum.reader)"}]
    assert points["encoding"]["shape"]["field"] == "reader"
    readers = [r for r in roc["data"]["values"] if r.get("reader")]
    assert [(r["reader"], r["fpr"], r["tpr"]) for r in readers] == [("rad1", "0.300000", "0.600000")] * 2


def test_the_demo_plots_use_the_templates() -> None:
    """The demo's dvc.yaml draws its bar and line plots with trackeval's templates (the files init copies)."""
    plots = {k: v for d in yaml.safe_load((REPO / "dvc.yaml").read_text())["plots"] for k, v in d.items()}
    used = {Path(p["template"]).stem for p in plots.values() if str(p["template"]).endswith(".json")}
    assert {t for t, _, _ in PLOT_TEMPLATES.values()} | {"trackeval_line_ci_by_region"} <= used
    for p in plots.values():
        if str(p["template"]).endswith(".json"):
            assert (REPO / p["template"]).resolve().parent == TEMPLATES
