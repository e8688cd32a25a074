"""Data is never markup: hostile names written through every output are shown as written, never interpreted.

A UMD manifest whose ``site`` group and ``subject_id`` columns hold rich markup (``[/]``, ``[bold red]x``), Markdown
table and heading syntax (``a|b|c``, a quoted newline followed by ``## injected``, U+2028), HTML
(``<script>alert(1)</script>``) and a spreadsheet formula (``=cmd|' /C calc'!A0``), and model names and versions as
hostile as MLflow allows (``[/]``, ``|``, ``<script>``, ``$\\nope$``, which matplotlib would parse as mathtext),
go through the terminal tables (evaluate, compare, promote, leaderboard), Markdown (``compare --markdown``,
``promote --summary``, ``leaderboard --markdown``), HTML (``compare --html``, the tracked ``report.html``, the
decision's ``decision.html``, ``leaderboard --html``), the pipeline's CSV plots and the figures logged to MLflow.
Every run exits 0, writes its files, and each value is escaped by the medium's one function in
:mod:`trackeval.io.escape`.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pytest

from tests import test_tracking
from tests.conftest import cube, save_nifti, umd_argv, write_manifest
from trackeval.io.escape import escape_csv, escape_html, escape_markdown, escape_mathtext, escape_terminal

migrated_db, store = test_tracking.migrated_db, test_tracking.store

#: the hostile values of the manifest's ``site`` and ``subject_id`` columns (one case each)
HOSTILE = [
    "[/]",
    "[bold red]x",
    "a|b|c",
    "x\n## injected",
    "<script>alert(1)</script>",
    "=cmd|' /C calc'!A0",
    "u\u2028## also injected",
]
#: a model name MLflow accepts (no ``/ : @ '``) that is markup in every medium
NAME = "[bold red]m $\\nope$ a|b"
#: versions MLflow accepts (``/`` is allowed in a version)
V1, V2 = "[/]", "<script>alert(1)</script>"
FAST = ("--executor", "local", "--no-cache", "--set", "bootstrap.n_resamples=20")
SITE = ("--set", "gate.group_dimensions=[organ, modality, site]")


def _dataset(root: Path) -> tuple[Path, Path, Path]:
    """Ground truth (one CT case per hostile value, liver and heart boxes) and two prediction folders."""
    gt, pred, pred2 = root / "gt", root / "pred", root / "pred2"
    for d in (gt, pred, pred2):
        d.mkdir(parents=True)
    shape, rows = (20, 18, 12), []
    for i, value in enumerate(HOSTILE):
        case = f"c{i + 1}_ct"
        truth = cube(shape, (2, 2, 2), (10, 10, 8), 1)
        cube(shape, (12, 11, 3), (17, 16, 9), 5, truth)
        save_nifti(gt / f"{case}.nii.gz", truth)
        p = cube(shape, (3, 2, 2), (11, 10, 8), 1)
        cube(shape, (12, 11, 3), (17, 16, 9), 5, p)
        save_nifti(pred / f"{case}.nii.gz", p)
        save_nifti(pred2 / f"{case}.nii.gz", cube(shape, (3 + i % 3, 3, 2), (11, 10, 8), 1))
        rows.append({"case_id": case, "subject_id": value, "modality": "ct", "site": value})
    write_manifest(gt / "manifest.csv", rows)
    return gt, pred, pred2


@pytest.fixture
def folders(cli, tmp_path) -> dict[str, Path]:
    """Results folders ``a`` (model NAME, V1) and ``b`` (NAME, V2, other predictions) of the hostile manifest."""
    gt, pred, pred2 = _dataset(tmp_path / "data")
    out = {"a": tmp_path / "a", "b": tmp_path / "b", "gt": gt, "pred": pred}
    for key, predictions, version in (("a", pred, V1), ("b", pred2, V2)):
        res = cli(*umd_argv(gt, predictions, out[key], *FAST, "--model-name", NAME, "--model-version", version))
        assert res.rc == 0, res.err
    return out


# ------------------------------------------------------------------------------------------------ helpers


def _unescaped(text: str, char: str) -> int:
    """How often ``char`` occurs in Markdown ``text`` not escaped (preceded by an even number of backslashes)."""
    return len(re.findall(r"(?<!\\)(?:\\\\)*" + re.escape(char), text))


def _cells(line: str) -> int:
    """Cells of a Markdown table row: its unescaped ``|`` separators, minus one."""
    return _unescaped(line, "|") - 1


def _check_markdown(text: str, headings: tuple[str, ...]) -> None:
    """Every table row has its header's number of cells, every heading is one of ours, and each hostile value
    is there, escaped."""
    lines = text.splitlines()
    width = None
    for line in lines:
        if not line.startswith("|"):
            width = None
            continue
        width = width if width is not None else _cells(line)
        assert _cells(line) == width, (line, width)
    assert not [ln for ln in lines if ln.lstrip().startswith(("## injected", "## also injected"))]
    assert all(ln.startswith(headings) for ln in lines if ln.startswith("#")), [ln for ln in lines if ln[:1] == "#"]
    assert _unescaped(text, "<") == 0 and "\u2028" not in text and "\x85" not in text


def _check_html(page: str) -> None:
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def _check_terminal(out: str, *values: str) -> None:
    """Each value shown as written (its control characters as visible escapes); ``[bold red]`` is not styling."""
    for value in values:
        shown = value.replace("\n", "\\n").replace("\u2028", "\\u2028").replace("\x1b", "\\x1b")
        shown = shown.replace("\u202e", "\\u202e")
        assert shown in out.replace("\u2060", ""), (shown, out)
    assert "\u2028" not in out


def _versions_tracked(cli, sets, folders) -> None:
    for key in ("a", "b"):
        res = cli("track", folders[key], *sets)
        assert res.rc == 0 and "logged as run" in res.err, res.err


# --------------------------------------------------------------------------------------------- terminal


def test_evaluate_terminal_shows_names_as_written(cli, umd_dataset, tmp_path):
    """A prediction file ``[bold red]x.nii.gz`` without a manifest row (a warning) and an ``--out`` path holding
    ``[/]`` (the ``wrote`` line): was a MarkupError (exit 1) and styled text."""
    gt, pred = umd_dataset()
    save_nifti(pred / "[bold red]x.nii.gz", np.zeros((20, 18, 12), np.uint8))
    out = tmp_path / "o[" / "]"
    res = cli(*umd_argv(gt, pred, out, *FAST, "--model-name", NAME, "--model-version", V1))
    assert res.rc == 0, res.err
    assert (out / "results.json").exists()
    assert "without a manifest row ignored: [bold red]x.nii.gz" in res.out
    assert f"wrote {out / 'cases.parquet'}" in res.err and "o[/]" in res.err


def test_compare_terminal_shows_group_values_as_written(cli, folders):
    """``[/]`` in a ``site`` group was ``internal error ... MarkupError`` (exit 1)."""
    res = cli("compare", folders["a"], folders["b"], *SITE)
    assert res.rc == 0, res.err
    _check_terminal(res.out, *(f"site={v}" for v in HOSTILE))


#: more terminal syntax: an ANSI colour sequence, a bidi override, an emoji code, a trailing backslash
TERMINAL = [*HOSTILE, "\x1b[31mred", "\u202eevil", ":smile: 12:30", "x\\"]


@pytest.mark.parametrize("value", TERMINAL, ids=[ascii(v) for v in TERMINAL])
def test_terminal_escape_round_trips_through_rich(value):
    """What a rich table shows for an escaped value is the value itself, control characters made visible (an
    emoji code keeps an invisible word joiner: shown, not replaced by the emoji)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200, record=True, file=io.StringIO())
    table = Table("group")
    table.add_row(escape_terminal(value))
    console.print(table)
    console.print(f"[yellow]warning:[/] {escape_terminal(value)}")
    text = console.export_text()
    _check_terminal(text, value, f"warning: {value}")
    assert "\x1b" not in text and "\u202e" not in text and "\U0001f604" not in text


# --------------------------------------------------------------------------------------------- Markdown


def test_compare_markdown_file_has_one_cell_per_column(cli, folders, tmp_path):
    """``a|b|c`` added cells; a quoted newline ended the row and injected ``## injected``; with ``[/]`` no file
    at all was written."""
    md = tmp_path / "cmp.md"
    res = cli("compare", folders["a"], folders["b"], *SITE, "--markdown", md)
    assert res.rc == 0, res.err
    text = md.read_text(encoding="utf-8")
    _check_markdown(text, ("## umd/dsc: A = ",))
    for value in HOSTILE:
        assert f"| {escape_markdown(f'site={value}')} |" in text
    assert "| site=a\\|b\\|c |" in text and "| site=x\\n\\#\\# injected |" in text


def test_compare_markdown_to_stdout(cli, folders):
    res = cli("compare", folders["a"], folders["b"], *SITE, "--markdown", "-")
    assert res.rc == 0, res.err
    _check_markdown(res.out, ("## umd/dsc: A = ",))
    _check_terminal(res.err, "site=[/]", "site=[bold red]x")  # the rich tables went to stderr


def test_compare_markdown_escapes_results_folder_labels(cli, folders, tmp_path):
    """The folder names are the labels of a folder comparison: a newline in one must not start a heading."""
    hostile = tmp_path / "r|x\n## injected"
    folders["a"].rename(hostile)
    md = tmp_path / "cmp.md"
    res = cli("compare", hostile, folders["b"], *SITE, "--markdown", md)
    assert res.rc == 0, res.err
    text = md.read_text(encoding="utf-8")
    _check_markdown(text, ("## umd/dsc: A = ",))
    assert f"A = {escape_markdown(str(hostile))}, B = " in text.splitlines()[0]


# ------------------------------------------------------------------------------------------------- HTML


def test_compare_html_escapes_groups_and_model_names(cli, folders, tmp_path):
    page_path = tmp_path / "cmp.html"
    res = cli("compare", folders["a"], folders["b"], *SITE, "--html", page_path)
    assert res.rc == 0, res.err
    page = page_path.read_text(encoding="utf-8")
    _check_html(page)
    assert f"<td>site={escape_html('[/]')}</td>" in page and escape_html(NAME) in page  # overlay heading
    assert page.count('src="data:image/png;base64,') >= 3  # both versions drawn, with the hostile names


@pytest.mark.parametrize("value", HOSTILE, ids=[ascii(v) for v in HOSTILE])
def test_html_escape_leaves_no_tag_or_attribute_break(value):
    escaped = escape_html(value)
    assert "<" not in escaped and ">" not in escaped and '"' not in escaped and "'" not in escaped


# ------------------------------------------------------------------------------------ MLflow: track, promote


def test_track_report_and_figures_with_hostile_names(cli, store, folders, tmp_path):
    """``$\\nope$`` in the model name was parsed as mathtext: drawing the figure titles failed (exit 1)."""
    sets, client = store
    _versions_tracked(cli, sets, folders)
    exp = client.get_experiment_by_name("trackeval").experiment_id
    runs = client.search_runs([exp], "tags.`trackeval.kind` = 'benchmark'")
    assert len(runs) == 2
    for run in runs:
        names = {a.path for a in client.list_artifacts(run.info.run_id)}
        figures = {a.path for a in client.list_artifacts(run.info.run_id, "figures")}
        assert "report.html" in names and "figures/umd__dsc__by_organ.png" in figures
        page = Path(client.download_artifacts(run.info.run_id, "report.html", str(tmp_path / run.info.run_id)))
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text and escape_html(NAME) in text


def test_figure_titles_and_legends_show_dollars_as_written(folders):
    """The titles, legends and tick labels of the figures logged to MLflow: ``$`` escaped, never mathtext."""
    import matplotlib.pyplot as plt

    from trackeval.io.results_folder import read_results
    from trackeval.report.figures import result_figures

    figures = result_figures(read_results(folders["a"]))
    assert figures
    try:
        for _, fig in figures:
            (ax,) = fig.axes
            assert escape_mathtext(f"{NAME}/{V1}") in ax.get_title()
            legend = ax.get_legend()
            labels = [t.get_text() for t in legend.get_texts()] if legend else []
            assert all("$" not in label.replace("\\$", "") for label in labels)
            fig.canvas.draw()  # mathtext would fail here on \nope
    finally:
        for _, fig in figures:
            plt.close(fig)


def test_promote_terminal_summary_and_decision_artifacts(cli, store, folders, tmp_path):
    """``promote`` prints the comparison tables (``[/]`` was a MarkupError) and appends the decision to the CI
    job summary (``a|b|c`` added cells, ``## injected`` became a heading); the decision run's ``decision.md`` and
    ``decision.html`` are escaped the same way."""
    sets, client = store
    _versions_tracked(cli, sets, folders)
    summary = tmp_path / "summary.md"
    first = cli("promote", "--model", NAME, "--candidate", V1, *sets, *SITE, "--summary", summary)
    assert first.rc == 0, first.out + first.err
    res = cli("promote", "--model", NAME, "--candidate", V2, *sets, *SITE, "--summary", summary)
    assert res.rc in (0, 1), res.err  # the verdict is not the point; the rendering is
    assert "Traceback" not in res.err and "internal error" not in res.err
    _check_terminal(res.out, *(f"site={v}" for v in HOSTILE), f"({NAME} {V2})")
    text = summary.read_text(encoding="utf-8")
    _check_markdown(text, ("# Gate ", "## umd/dsc: A = "))
    assert f"# Gate {escape_markdown(NAME)}: candidate {escape_markdown(V2)} vs champion {escape_markdown(V1)}" in text
    assert "| site=a\\|b\\|c |" in text
    exp = client.get_experiment_by_name("trackeval").experiment_id
    (decision,) = client.search_runs(
        [exp], "tags.`trackeval.kind` = 'gate_decision' and tags.`trackeval.gate.champion` != ''"
    )
    dl = tmp_path / "dl"
    md = Path(client.download_artifacts(decision.info.run_id, "decision.md", str(dl))).read_text(encoding="utf-8")
    _check_markdown(md, ("# Gate ", "## umd/dsc: A = "))
    _check_html(Path(client.download_artifacts(decision.info.run_id, "decision.html", str(dl))).read_text())


def test_promote_dry_run_summary_to_stdout(cli, store, folders):
    sets, _ = store
    _versions_tracked(cli, sets, folders)
    assert cli("promote", "--model", NAME, "--candidate", V1, *sets).rc == 0
    res = cli("promote", "--model", NAME, "--candidate", V2, "--dry-run", *sets, *SITE, "--summary", "-")
    assert res.rc in (0, 1), res.err
    assert "internal error" not in res.err
    _check_markdown(res.out, ("# Gate ", "## umd/dsc: A = "))
    _check_terminal(res.err, "site=[/]", f"({NAME} {V2})")


def test_promote_dry_run_of_the_champion_escapes_the_names(cli, store, folders):
    """Nothing to gate: the one-paragraph summary names the model and the version, escaped."""
    sets, _ = store
    _versions_tracked(cli, sets, folders)
    assert cli("promote", "--model", NAME, "--candidate", V1, *sets).rc == 0
    res = cli("promote", "--model", NAME, "--candidate", V1, "--dry-run", *sets, "--summary", "-")
    assert res.rc == 0, res.err
    assert res.out.startswith(f"# Gate {escape_markdown(NAME)}: candidate {escape_markdown(V1)} is the champion")
    _check_markdown(res.out, ("# Gate ",))
    _check_terminal(res.err, f"candidate is the champion: {NAME}@champion is {V1} and")


# ------------------------------------------------------------------------------------------- leaderboard


def test_leaderboard_terminal_markdown_and_html(cli, store, folders, tmp_path):
    sets, _ = store
    _versions_tracked(cli, sets, folders)
    assert cli("promote", "--model", NAME, "--candidate", V1, *sets).rc == 0
    md, page = tmp_path / "board.md", tmp_path / "board.html"
    res = cli("leaderboard", "--model", NAME, "--markdown", md, "--html", page, *sets)
    assert res.rc == 0, res.err
    _check_terminal(res.out, V1, "[bold red]m")
    text = md.read_text(encoding="utf-8")
    _check_markdown(text, ("## Leaderboard",))
    rows = [ln for ln in text.splitlines() if ln.startswith(f"| {escape_markdown(NAME)} |")]
    assert len(rows) == 2 and _cells(rows[0]) == 4, rows  # model, version, umd/dsc, gate
    html = page.read_text(encoding="utf-8")
    _check_html(html)
    assert html.count('class="champion"') == 1


# ------------------------------------------------------------------------------------------------- CSV


def test_pipeline_csv_plots_quote_and_defuse_formulas(cli, tmp_path):
    """``plots/box_dsc_by_organ.csv`` lists every case's ``subject_id``: quoted by the csv module (a newline
    stays in its cell) and a leading ``=`` prefixed with ``'`` (a spreadsheet would run it)."""
    data = tmp_path / "raw"
    _dataset(data)
    params = tmp_path / "params.yaml"
    params.write_text(
        "bootstrap: {n_resamples: 20}\nengine: {executor: local, cache: false}\n"
        "pipeline:\n  evaluations:\n    umd:\n      unit: umd\n"
        "      inputs: {ground_truth: '{data}/gt', predictions: '{data}/pred'}\n",
        encoding="utf-8",
    )
    work = tmp_path / "work"
    args = ("--params", params, "--data", data, "--work", work)
    res = cli("pipeline", "evaluate", *args, "--version", "v1", "--benchmark", "umd")
    assert res.rc == 0, res.err
    folder = work / "eval" / "umd" / "v1"
    assert (folder / "plot.csv").stat().st_size > 0
    with open(folder / "plots" / "box_dsc_by_organ.csv", newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    assert header == ["organ", "case_id", "subject_id", "value"]
    assert all(len(r) == 4 for r in rows)
    subjects = {r[2] for r in rows}
    assert subjects == {escape_csv(v) for v in HOSTILE}
    assert "'=cmd|' /C calc'!A0" in subjects and "x\n## injected" in subjects
    assert not [s for s in subjects if s.startswith(("=", "+", "-", "@"))]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
        ("site_a", "site_a"),
        (-0.5, -0.5),
    ],
)
def test_csv_escape_defuses_formulas_only(value, expected):
    assert escape_csv(value) == expected


# ------------------------------------------------------------------------------------ one function each


def test_renderers_use_the_one_escaping_module():
    """No renderer keeps its own ``html.escape`` / ``rich.markup.escape``: they import them from io/escape.py."""
    src = Path(__file__).resolve().parents[2] / "src" / "trackeval"
    offenders = []
    for path in [*(src / "report").glob("*.py"), *(src / "commands").glob("*.py"), src / "pipeline" / "stages.py"]:
        text = path.read_text(encoding="utf-8")
        if re.search(r"from html import|import html\b|rich\.markup|markup=False", text):
            offenders.append(path.name)
    assert offenders == []
