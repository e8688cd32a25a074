"""DVC plots keep the uncertainty: trackeval's Vega-Lite templates, as ``trackeval init`` installs them in a
repository, rendered by real ``dvc plots show --json``: whiskers on bars, a band on lines and the readers' points on
the ROC, with the CI fields of every plot CSV in the data DVC fills in. The demo's dvc.yaml uses the same files.

Offline (issue 37): the HTML page ``dvc plots show`` writes draws its charts in headless Chromium with the network
blocked (every name resolves nowhere, every other request goes to a dead proxy), from the Vega scripts trackeval
vendors; DVC's own page (scripts from a CDN) stays blank under the same flags, so the block is real."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from tests.conftest import REPO, scaled
from tests.test_tracking import CHROMIUM, needs_chromium
from trackeval.errors import InputError
from trackeval.pipeline import offline_plots
from trackeval.pipeline.init import PLOT_TEMPLATES, TEMPLATES, init, plan
from trackeval.pipeline.offline_plots import HTML_TEMPLATE, PAGE, VENDOR, VENDORED, page
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


def _init_repo(tmp_path: Path) -> Path:
    """A fresh git + DVC repository where ``trackeval init`` set up UMD, IMIS and X-ray classification."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _run(repo, "git", "init", "-q")
    _run(repo, str(BIN / "dvc"), "init", "-q")
    _run(repo, str(BIN / "trackeval"), "init", "--unit", "umd", "--unit", "imis", "--unit", "xray/cls", "--model", "m")
    return repo


def test_init_templates_rendered_by_dvc_plots_show(tmp_path: Path) -> None:
    repo = _init_repo(tmp_path)
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


# ------------------------------------------------------------------------------------------ offline page


def _offline_chromium(tmp_path: Path, page_file: Path, shot: Path | None = None) -> str:
    """Headless Chromium without network: every host name resolves nowhere and every request that is not to
    loopback goes to a dead proxy (127.0.0.1:9). The DOM after 5 s of virtual time, or (``shot``) a screenshot."""
    flags = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1400,1600",
        "--virtual-time-budget=5000",
    ]
    what = [f"--screenshot={shot}"] if shot else ["--dump-dom"]
    done = subprocess.run([*flags, *what, page_file.as_uri()], capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _pixels(shot: Path, rgb: tuple[int, int, int]) -> int:
    """How many pixels of the screenshot are within 12 per channel of ``rgb``."""
    image = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    return int((np.abs(image - np.array(rgb)).max(axis=2) <= 12).sum())


@pytest.mark.slow
@needs_chromium
def test_dvc_plots_show_draws_offline_in_chromium(tmp_path: Path) -> None:
    repo = _init_repo(tmp_path)
    assert _run(repo, str(BIN / "dvc"), "config", "plots.html_template").strip() == HTML_TEMPLATE  # DVC reads it
    _csvs(repo)
    _run(repo, str(BIN / "dvc"), "plots", "show")
    html = (repo / "dvc_plots" / "index.html").read_text(encoding="utf-8")
    assert "<script src" not in html and "jsdelivr" not in html  # nothing to fetch
    assert html.count('vegaEmbed("#trackeval_') + html.count("vegaEmbed('#trackeval_") == 3

    dom = _offline_chromium(tmp_path, repo / "dvc_plots" / "index.html")
    assert len(re.findall(r'<svg[^>]*class="marks"', dom)) == 3  # one chart per plot
    roles = re.findall(r'aria-roledescription="([a-z ]+)"', dom)
    assert roles.count("bar") == 4  # 2 organs x 2 versions
    assert roles.count("area mark") == 2 and roles.count("rule mark") == 4  # the imis CI bands, the umd whiskers
    assert roles.count("line mark") == 4 and roles.count("point") == 4  # imis lines + ROC curves; imis points
    shot = tmp_path / "offline.png"
    _offline_chromium(tmp_path, repo / "dvc_plots" / "index.html", shot)
    # Vega's first two colours (#4c78a8, #f58518) at the bars' opacity over white: the v1 and v2 bars drew
    blue, orange = _pixels(shot, (112, 147, 185)), _pixels(shot, (247, 157, 70))
    assert blue > 5000 and orange > 5000, (blue, orange)

    # the control: DVC's own page (its scripts from a CDN) under the same flags draws nothing
    _run(repo, str(BIN / "dvc"), "config", "--unset", "plots.html_template")
    _run(repo, str(BIN / "dvc"), "plots", "show", "-o", "cdn_plots")
    assert "cdn.jsdelivr.net" in (repo / "cdn_plots" / "index.html").read_text(encoding="utf-8")
    blank = _offline_chromium(tmp_path, repo / "cdn_plots" / "index.html")
    assert "<svg" not in blank and "<canvas" not in blank and 'class="vega-embed' not in blank


def test_the_page_inlines_the_pinned_vendored_scripts() -> None:
    """The page holds each vendored file byte for byte (sha256 as pinned, the npm builds of the versions
    docs/pipeline.md names), with its LICENSE, and keeps dvc_render's contract: ``{plot_divs}``, no ``{scripts}``."""
    text = page()
    assert "{plot_divs}" in text and "{scripts}" not in text and "{refresh_tag}" in text
    inline = re.findall(r"<script>(.*?)</script>", text, re.DOTALL)
    assert [hashlib.sha256(s.encode()).hexdigest() for s in inline] == [sha for *_, sha in VENDORED]
    assert [(p, v) for _, p, v, _ in VENDORED] == [("vega", "6.4.0"), ("vega-lite", "6.5.0"), ("vega-embed", "7.3.0")]
    for _, package, version, _ in VENDORED:
        assert "Redistribution and use in source and binary forms" in (VENDOR / f"LICENSE.{package}").read_text()
        assert f"| {version} | BSD-3-Clause, `LICENSE.{package}` |" in (VENDOR / "README.md").read_text()
        assert f"{package} {version}" in (REPO / "docs" / "pipeline.md").read_text(encoding="utf-8")
    assert page() == text  # deterministic


def test_a_changed_vendored_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "vega.min.js").write_text("window.vega = {};</script><script>alert(1)")
    monkeypatch.setattr(offline_plots, "VENDOR", tmp_path)
    with pytest.raises(InputError, match="differs from the vendored file"):
        offline_plots.vendored_script("vega.min.js", VENDORED[0][3])
    sha = hashlib.sha256((tmp_path / "vega.min.js").read_bytes()).hexdigest()
    with pytest.raises(InputError, match="cannot stand in an inline <script>"):
        offline_plots.vendored_script("vega.min.js", sha)


def _bare_repo(root: Path, dvc_config: str) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".dvc").mkdir()
    (root / ".dvc" / "config").write_text(dvc_config)
    return root / ".dvc" / "config"


def test_init_sets_the_html_template_and_keeps_the_rest_of_dvc_config(tmp_path: Path) -> None:
    mine = "[core]\n    remote = store\n['remote \"store\"']\n    url = /srv/dvc\n[plots]\n    auto_open = false\n"
    config = _bare_repo(tmp_path / "a", mine)
    lines = init(tmp_path / "a", plan(["umd"], "m", ["v1", "v2"]))
    assert f".dvc/config: plots.html_template = {HTML_TEMPLATE} (dvc plots show works offline)" in lines
    assert config.read_text() == mine.replace("[plots]\n", f"[plots]\n    html_template = {HTML_TEMPLATE}\n")
    assert (tmp_path / "a" / PAGE).read_text(encoding="utf-8") == page()
    assert "dvc_plots/" in (tmp_path / "a" / ".gitignore").read_text().splitlines()

    theirs = "[plots]\n    html_template = mine.html\n"
    config = _bare_repo(tmp_path / "b", theirs)
    lines = init(tmp_path / "b", plan(["umd"], "m", ["v1", "v2"]))
    assert ".dvc/config: plots.html_template is 'mine.html', kept (--force)" in lines and config.read_text() == theirs
    init(tmp_path / "b", plan(["umd"], "m", ["v1", "v2"]), force=True)
    assert config.read_text() == f"[plots]\n    html_template = {HTML_TEMPLATE}\n"


def test_the_demo_draws_offline_too() -> None:
    """This repository's .dvc/config names the same page, committed as init writes it."""
    assert f"html_template = {HTML_TEMPLATE}" in (REPO / ".dvc" / "config").read_text()
    assert (REPO / PAGE).read_text(encoding="utf-8") == page()
