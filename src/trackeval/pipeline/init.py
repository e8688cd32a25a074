"""``trackeval init``: trackeval's stages in a repository's own DVC pipeline, after the repository's own stages.

Writes, in the repository root (``--root``, default the current folder), only what is missing:

- ``dvc.yaml``: one ``trackeval_evaluate_<evaluation>`` stage per unit (``foreach`` version), then
  ``trackeval_track`` and ``trackeval_gate`` (both ``always_changed``: the MLflow registry is outside DVC's
  view). The evaluate stage depends on the unit's inputs, so DVC runs it after the repository's own stage that
  writes the predictions. A trackeval stage already there is refused without ``--force``.
- ``params.yaml``: the trackeval sections that are not there yet (``pipeline``: model name, versions, each
  evaluation's inputs with ``{version}`` placeholders; ``bootstrap``, ``tracking``, ``gate`` and the units'
  sections with their defaults), appended; ``--force`` replaces only the ``pipeline`` section's lines.
- ``.gitignore``: the local MLflow store, its lock, the case cache and the gate's machine-local verdict.
- ``.github/workflows/trackeval.yml``: ``dvc repro`` then ``trackeval pipeline verdict`` (the job fails, at the
  step that prints why, when the candidate does not pass the gate).
- ``.dvc/plots/trackeval_*.json``: Vega-Lite templates that keep the CIs (whiskers on bars, bands on lines, the
  readers' points on the ROC), and one ``plots:`` entry per evaluation in dvc.yaml using them.

One transaction (issue 34): every file is planned and every input checked before anything is written (odd or
malformed YAML is one :class:`~trackeval.errors.InputError` naming the file and line; a read-only file is refused
without ``--force``; a file where a folder is needed is refused), then the changed files are written as one set
(:func:`trackeval.io.atomic.write_files`), so on any failure nothing changed. The user's params.yaml and
dvc.yaml are edited as text (:mod:`trackeval.pipeline.yaml_text`): their comments, anchors, quoting and values
as DVC reads them (YAML 1.2) keep their bytes outside trackeval's entries, and the edit is read back (ruamel.yaml
as DVC, PyYAML as trackeval) before it is written. Symbolic links are written through to their targets; modes
are kept. :func:`init` returns one line per file saying what it did.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from trackeval._version import __version__
from trackeval.api import load_config
from trackeval.config.loader import load_yaml
from trackeval.errors import ConfigError, InputError, TrackevalError
from trackeval.io.atomic import write_files
from trackeval.io.redact import redact_uri, without_userinfo
from trackeval.io.structured import read_limited
from trackeval.pipeline.offline_plots import HTML_TEMPLATE, PAGE, page
from trackeval.pipeline.yaml_text import (
    TextEdit,
    child,
    dump_block,
    dump_items,
    entries,
    is_null,
    items,
    load_rt,
    parse,
    plain,
)
from trackeval.registry import unit

#: the trackeval stages' names in dvc.yaml (``trackeval_evaluate_<evaluation>`` besides these two)
TRACK_STAGE, GATE_STAGE = "trackeval_track", "trackeval_gate"
WORKFLOW = Path(".github") / "workflows" / "trackeval.yml"
#: trackeval's Vega-Lite templates for DVC plots (whiskers and bands from the plot CSVs' ci95_low/ci95_high),
#: copied into the repository's ``.dvc/plots/`` (DVC's template folder) and used by name
TEMPLATES = Path(__file__).with_name("plot_templates")
#: per kind of a unit's first declared plot (its ``plot.csv``): the template and the fields DVC calls x and y
PLOT_TEMPLATES = {
    "bar": ("trackeval_bars_ci", "value", "{dimension}"),
    "line": ("trackeval_line_ci", "{dimension}", "value"),
    "roc": ("trackeval_roc_readers", "fpr", "tpr"),
}
PARAMS, DVC = "params.yaml", "dvc.yaml"
#: what the evaluate stages iterate over (DVC templating reads params.yaml): adding a version is one line there
VERSIONS = "${pipeline.versions}"
#: the lines init adds to .gitignore: the local MLflow store, its lock and artifacts, the case cache, the gate's
#: machine-local verdict and the page ``dvc plots show`` writes
#: mlruns/: the artifacts of a run of MLflow's Default experiment (``mlflow.models.evaluate`` in a user's own
#: ``mlflow.start_run()``) on the default SQLite store
IGNORED = (
    ".trackeval-cache/",
    "mlflow.db",
    "mlflow.db.trackeval.lock",
    "mlartifacts/",
    "mlruns/",
    "work/gate/",
    "dvc_plots/",
)
#: the config sections every trackeval stage reads besides the units' own
SHARED_SECTIONS = ("bootstrap", "tracking", "gate")


@dataclass(frozen=True)
class Plan:
    """What ``trackeval init`` sets up: the registered ``model`` name, its ``versions`` (oldest first, the gate's
    order) and ``{evaluation name: unit}`` (``xray/cls`` -> ``xray_cls``)."""

    model: str
    versions: tuple[str, ...]
    evaluations: dict[str, str]


def plan(units: list[str], model: str, versions: list[str]) -> Plan:
    """The :class:`Plan` for ``units`` (registered benchmark units; ``ConfigError`` naming an unknown one)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", model):
        raise ConfigError(f"--model {model!r}: use letters, digits, '_', '.' and '-'")
    if len(versions) < 1 or len(set(versions)) != len(versions):
        raise ConfigError(f"--versions {versions}: give distinct version names, oldest first")
    for u in units:
        unit(u)
    return Plan(model, tuple(versions), {u.replace("/", "_"): u for u in dict.fromkeys(units)})


def _inputs(evaluation: str, unit_name: str) -> dict[str, str]:
    """The evaluation's inputs as params.yaml holds them: the unit's required path inputs at ``data/<evaluation>``
    (ground truth) and ``predictions/{version}/<evaluation>`` (what the repository's predict stage writes)."""
    fields = unit(unit_name).inputs.model_fields
    out = {}
    for name, info in fields.items():
        if name == "ground_truth":
            out[name] = f"data/{evaluation}"
        elif name == "predictions":
            out[name] = f"predictions/{{version}}/{evaluation}"
        elif info.is_required():
            out[name] = f"data/{evaluation}_{name}"
    return out


def _stages(p: Plan) -> dict[str, Any]:
    """The trackeval stages of dvc.yaml (DVC's ``foreach``/``${item}`` syntax; ``foreach`` over
    ``${pipeline.versions}``, so the versions are listed once, in params.yaml)."""
    stages: dict[str, Any] = {}
    for evaluation, unit_name in p.evaluations.items():
        deps = [v.replace("{version}", "${item}") for v in _inputs(evaluation, unit_name).values()]
        out = f"work/eval/{evaluation}/${{item}}"
        stages[f"trackeval_evaluate_{evaluation}"] = {
            "foreach": VERSIONS,  # the one list of versions: params.yaml's pipeline.versions
            "do": {
                "cmd": f"trackeval pipeline evaluate --benchmark {evaluation} --version ${{item}}",
                "deps": deps,
                "params": [
                    *SHARED_SECTIONS[:1],
                    unit(unit_name).config_section,
                    "pipeline.model_name",
                    f"pipeline.evaluations.{evaluation}",
                ],  # fmt: skip
                "outs": [
                    f"{out}/results.json",
                    f"{out}/cases.parquet",
                    {f"{out}/metrics.json": {"cache": False}},
                    {f"{out}/plot.csv": {"cache": False}},
                    {f"{out}/plots": {"cache": False}},
                ],  # fmt: skip
                "metrics": [{f"{out}/headline.json": {"cache": False}}],
            },
        }
    stages[TRACK_STAGE] = {
        "cmd": "trackeval pipeline track",
        "always_changed": True,
        "deps": ["work/eval"],
        "params": ["tracking", "pipeline.model_name", "pipeline.versions"],
        "outs": ["work/track/tracked.json"],
    }
    stages[GATE_STAGE] = {
        "cmd": "trackeval pipeline gate",
        "always_changed": True,
        "deps": ["work/track/tracked.json"],
        "params": ["gate", "pipeline.model_name"],
    }
    return stages


@dataclass(frozen=True)
class _Edit:
    """One file init writes: its name as printed, where its bytes go (a symbolic link's target), its text now
    (``None``: no file), the text init writes and the line it prints."""

    shown: str
    path: Path
    old: str | None
    new: str
    line: str


def _read(root: Path, name: str | Path) -> tuple[Path, str | None]:
    """Where ``root/name``'s bytes live (a symbolic link's target: written through, never replaced) and its text
    (``None`` when there is no file), bounded and UTF-8."""
    path = root / name
    try:
        target = path.resolve() if path.is_symlink() else path
    except (OSError, RuntimeError):
        raise InputError("cannot resolve the symbolic link (a loop?)", file=str(name)) from None
    if not target.exists():
        return target, None
    if not target.is_file():
        raise InputError("not a regular file: trackeval init writes a file here", file=str(name))
    try:
        return target, read_limited(target).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=str(name)) from None


def _append(text: str, block: str) -> str:
    """``text`` unchanged, then a blank line and ``block`` (``block`` alone for an empty file)."""
    if text and not text.endswith(("\n", "\r")):
        text += "\n"
    return text + ("\n" if text.strip() else "") + block


def _trackeval_plot(item: Any, names: list[str]) -> bool:
    return isinstance(item, dict) and bool(set(item) & set(names))


def _check_kind(pair: tuple[ScalarNode, Node] | None, kind: type, what: str, name: str) -> None:
    """A top-level ``stages``/``plots`` entry of dvc.yaml holds ``kind`` (or nothing)."""
    if pair is None or is_null(pair[1]) or isinstance(pair[1], kind):
        return
    key, value = pair
    got = f"the value {value.value}" if isinstance(value, ScalarNode) else f"a {type(value).__name__[:-4].lower()}"
    raise InputError(
        f"'{key.value}' on line {key.start_mark.line + 1} must be {what} (DVC's dvc.yaml format), not {got}",
        file=name,
        field=str(key.value),
    )


def _merge_stages(edit: TextEdit, pair, span, user: dict, ours: dict[str, Any], clash: list[str]) -> None:
    """trackeval's stages at the end of ``stages:`` (the clashing ones removed first), the others' lines kept."""
    if pair is None:
        edit.insert(len(edit.lines), "stages:\n" + dump_block(ours, 2))
        return
    value = pair[1]
    if is_null(value) or value.flow_style or not value.value:  # no lines to keep one by one
        merged = {k: v for k, v in user.items() if k not in ours} | ours
        edit.replace(*span, "stages:\n" + dump_block(merged, 2))
        return
    spans = entries(value, edit, stop=span[1])
    for name in clash:
        edit.delete(*spans[name])
    edit.insert(max(end for _, end in spans.values()), dump_block(ours, value.value[0][0].start_mark.column))


def _merge_plots(edit: TextEdit, pair, span, user: list, plots: list[dict[str, Any]], names: list[str]) -> None:
    """trackeval's plots at the end of ``plots:`` (its earlier ones removed), the others' lines kept."""
    if pair is None:
        if plots:
            edit.insert(len(edit.lines), "plots:\n" + dump_items(plots, 2))
        return
    value = pair[1]
    if is_null(value) or value.flow_style or not value.value:
        merged = [x for x in user if not _trackeval_plot(x, names)] + plots
        edit.replace(*span, "plots:\n" + dump_items(merged, 2) if merged else "plots: []\n")
        return
    spans = items(value, edit, stop=span[1])
    for (first, end, _), item in zip(spans, user, strict=True):
        if _trackeval_plot(item, names):
            edit.delete(first, end)
    if plots:
        edit.insert(max(end for _, end, _ in spans), dump_items(plots, spans[0][2]))


def _dvc_text(text: str, node: Node, data: Any, p: Plan, force: bool) -> str:
    """dvc.yaml's text with trackeval's stages and plots (see :func:`_dvc_yaml`)."""
    if not isinstance(node, MappingNode) or node.flow_style:
        raise InputError(f"must hold a block mapping at the top level (line {node.start_mark.line + 1})", file=DVC)
    stages, plots = child(node, "stages"), child(node, "plots")
    _check_kind(stages, MappingNode, "a mapping of stage names to stages", DVC)
    _check_kind(plots, SequenceNode, "a list of plots", DVC)
    ours, user_stages = _stages(p), dict(data.get("stages") or {})
    clash = sorted(set(user_stages) & set(ours))
    if clash and not force:
        raise ConfigError(f"{DVC} already has stage(s) {clash}: run `trackeval init --force` to replace them")
    edit = TextEdit(text)
    top = entries(node, edit)
    _merge_stages(edit, stages, top.get("stages"), user_stages, ours, clash)
    new_plots = _plots(p)
    _merge_plots(edit, plots, top.get("plots"), list(data.get("plots") or []), new_plots, _names(new_plots))
    return edit.result()


def _names(plots: list[dict[str, Any]]) -> list[str]:
    return [n for d in plots for n in d]


def _dvc_yaml(root: Path, p: Plan, force: bool) -> _Edit:
    """``dvc.yaml`` with the trackeval stages and plots added (created when missing). The file is edited as text
    (:mod:`trackeval.pipeline.yaml_text`): the repository's stages, plots, comments and anchors keep their
    bytes; a trackeval stage already there is refused without ``force``."""
    path, old = _read(root, DVC)
    ours, plots = _stages(p), _plots(p)
    text = old or ""
    node, data = parse(text, DVC) if text.strip() else (None, None)
    if data is None:  # no file, an empty one, or comments only
        new = _append(text, dump_block({"stages": ours, **({"plots": plots} if plots else {})}))
    else:
        new = _dvc_text(text, node, data, p, force)
        names = _names(plots)
        expect = dict(data) | {"stages": {k: v for k, v in (data.get("stages") or {}).items() if k not in ours} | ours}
        if plots or "plots" in data:
            expect["plots"] = [x for x in data.get("plots") or [] if not _trackeval_plot(x, names)] + plots
        _verify(new, DVC, expect, keys=list(expect))
    line = f"{DVC}: stages {', '.join(ours)}" + (f"; plots {', '.join(_names(plots))}" if plots else "")
    return _Edit(DVC, path, old, new, line)


def _verify(new: str, name: str, expect: dict[str, Any], keys: list[str], *, trackeval_reads: bool = False) -> None:
    """The edited text reads back as meant: ``expect[key]`` for each of ``keys`` as ruamel.yaml (YAML 1.2, DVC)
    reads it, and (``trackeval_reads``) as trackeval's own loader (PyYAML) reads it too."""
    try:
        views = [load_rt(new, name)] + ([load_yaml(new, where=name)] if trackeval_reads else [])
    except (TrackevalError, yaml.YAMLError) as exc:
        raise ConfigError(f"{name}: trackeval's entries cannot be added without breaking the file ({exc})") from None
    for view in views:
        for key in keys:
            if not isinstance(view, dict) or plain(view.get(key)) != plain(expect.get(key)):
                raise ConfigError(
                    f"{name}: adding trackeval's entries as text would change {key!r} as YAML reads it; "
                    "nothing was written (please report this with the file)"
                )


def _plots(p: Plan) -> list[dict[str, Any]]:
    """One DVC plot per evaluation whose first declared plot has a trackeval template: every version's
    ``plot.csv`` on one chart, with its CIs (:data:`PLOT_TEMPLATES`)."""
    out = []
    for evaluation, unit_name in p.evaluations.items():
        plots = unit(unit_name).plots
        if not plots or plots[0].kind not in PLOT_TEMPLATES:
            continue
        template, x, y = (f.format(dimension=plots[0].dimension) for f in PLOT_TEMPLATES[plots[0].kind])
        files = {f"work/eval/{evaluation}/{v}/plot.csv": y for v in p.versions}
        out.append({f"trackeval_{evaluation}": {"template": template, "x": x, "y": files}})
    return out


def _default_sections(p: Plan) -> dict[str, Any]:
    """``pipeline`` for the plan, then the shared and the units' config sections with their defaults."""
    defaults = load_config().model_dump(mode="json")
    evaluations = {e: {"unit": u, "inputs": _inputs(e, u)} for e, u in p.evaluations.items()}
    out: dict[str, Any] = {
        "pipeline": {"model_name": p.model, "versions": list(p.versions), "evaluations": evaluations}
    }
    for section in (*SHARED_SECTIONS, *(unit(u).config_section for u in p.evaluations.values())):
        out[section] = defaults[section]
    return out


#: the comment line above the sections init appends to params.yaml (removed with them by ``init --force``)
PARAMS_HEADER = "# trackeval (trackeval init): its stages read these sections; docs/own-pipeline.md\n"


def _without_pipeline(text: str, node: MappingNode) -> str:
    """params.yaml's text without its ``pipeline`` section's lines (and init's comment line right above it)."""
    if node.flow_style:
        raise ConfigError(f"{PARAMS} is one flow mapping ({{...}}): write it in block style, then run init --force")
    edit = TextEdit(text)
    spans = entries(node, edit)
    if "pipeline" not in spans:
        raise ConfigError(f"{PARAMS}: the 'pipeline' section comes from a merge key (<<): remove it by hand")
    first, end = spans["pipeline"]
    if first > 0 and edit.lines[first - 1] == PARAMS_HEADER:
        first -= 1
    edit.delete(first, end)
    return edit.result()


def _params_yaml(root: Path, p: Plan, force: bool) -> _Edit:
    """``params.yaml`` with the missing trackeval sections appended (created when missing). Every byte of the
    file stays but, with ``force``, the ``pipeline`` section's lines (an existing one is refused without it)."""
    path, old = _read(root, PARAMS)
    text = old or ""
    node, data = parse(text, PARAMS) if text.strip() else (None, None)
    if data is not None and not isinstance(data, dict):
        raise InputError(f"must hold a mapping at the top level (line {node.start_mark.line + 1})", file=PARAMS)
    data = data or {}
    if "pipeline" in data:
        if not force:
            raise ConfigError(f"{PARAMS} already has a 'pipeline' section: run `trackeval init --force` to replace it")
        text = _without_pipeline(text, node)
    yours = [k for k in data if k != "pipeline"]
    added = {k: v for k, v in _default_sections(p).items() if k not in yours}
    new = _append(text, PARAMS_HEADER + dump_block(added, both_readers=True))
    _verify(new, PARAMS, {**{k: data[k] for k in yours}, **added}, [*yours, *added], trackeval_reads=False)
    _verify(new, PARAMS, added, list(added), trackeval_reads=True)
    kept = f" (kept yours: {', '.join(map(str, yours))})" if yours else ""
    return _Edit(PARAMS, path, old, new, f"{PARAMS}: sections {', '.join(added)}{kept}")


def _gitignore(root: Path) -> _Edit:
    path, old = _read(root, ".gitignore")
    text = old or ""
    have = {line.strip().lstrip("/") for line in text.splitlines()}  # `/dvc_plots/` covers `dvc_plots/` here
    missing = [line for line in IGNORED if line not in have]
    new = text + ("\n" if text and not text.endswith("\n") else "") + "".join(f"{m}\n" for m in missing)
    return _Edit(
        ".gitignore", path, old, new, f".gitignore: {'added ' + ', '.join(missing) if missing else 'nothing missing'}"
    )


def _workflow_text(p: Plan) -> str:
    return f"""# trackeval's stages in CI (trackeval init): dvc repro, then the gate's verdict for the candidate.
name: trackeval
on: [pull_request, push]
jobs:
  evaluate:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install (add your own requirements here)
        run: pip install "medtrackeval[demo]=={__version__}"
      - name: Data (needs a DVC remote)
        run: dvc pull
      - name: dvc repro (a failing gate records its decision; the stage completes)
        run: dvc repro
      - name: Gate verdict for {p.model}/{p.versions[-1]} (fails the job when the candidate does not pass)
        run: trackeval pipeline verdict
"""


def _workflow(root: Path, p: Plan, force: bool) -> _Edit:
    shown = WORKFLOW.as_posix()
    path, old = _read(root, WORKFLOW)
    if old is not None and not force:
        return _Edit(shown, path, old, old, f"{shown}: exists, kept (--force replaces it)")
    return _Edit(shown, path, old, _workflow_text(p), f"{shown}: written")


def _templates(root: Path, force: bool) -> list[_Edit]:
    """trackeval's plot templates and the offline HTML page (:func:`~trackeval.pipeline.offline_plots.page`) in
    ``.dvc/plots/`` (an existing one that differs is kept without ``force``)."""
    files = {f".dvc/plots/{src.name}": src.read_text(encoding="utf-8") for src in sorted(TEMPLATES.glob("*.json"))}
    files[PAGE.as_posix()] = page()
    out = []
    for shown, text in files.items():
        path, old = _read(root, shown)
        if old is not None and old != text and not force:
            out.append(_Edit(shown, path, old, old, f"{shown}: differs, kept (--force)"))
        else:
            out.append(_Edit(shown, path, old, text, f"{shown}: written"))
    return out


_SECTION = re.compile(r"^\s*\[\s*['\"]?([^'\"\]]*?)['\"]?\s*\]\s*$")
_SETTING = re.compile(r"^\s*html_template\s*=\s*(.*?)\s*$")


def _html_template_line(lines: list[str]) -> tuple[int | None, int | None, str | None]:
    """In ``.dvc/config``'s ``lines``: the index of the ``[plots]`` header, of its first ``html_template`` line and
    that line's value (None for what is absent)."""
    sections = [(i, m.group(1)) for i, line in enumerate(lines) if (m := _SECTION.match(line))]
    start = next((i for i, name in sections if name == "plots"), None)
    if start is None:
        return None, None, None
    end = next((i for i, _ in sections if i > start), len(lines))
    found = [(i, m.group(1)) for i in range(start + 1, end) if (m := _SETTING.match(lines[i]))]
    at, current = found[0] if found else (None, None)
    return start, at, current


def _dvc_config(root: Path, force: bool) -> _Edit:
    """``.dvc/config`` (DVC's INI file) with ``[plots] html_template`` naming the offline page, so ``dvc plots
    show`` draws without network; its other lines are kept byte for byte. Another template already named there is
    kept without ``force``; the file is created when missing."""
    shown = ".dvc/config"
    path, old = _read(root, shown)
    text = old or ""
    lines = text.splitlines(keepends=True)
    setting, done = f"    html_template = {HTML_TEMPLATE}\n", f"{shown}: plots.html_template = {HTML_TEMPLATE}"
    start, at, current = _html_template_line(lines)
    if start is None:
        new = text + ("\n" if text and not text.endswith("\n") else "") + "[plots]\n" + setting
        return _Edit(shown, path, old, new, f"{done} (dvc plots show works offline)")
    if current == HTML_TEMPLATE:
        return _Edit(shown, path, old, text, f"{done}: already set")
    if current is not None and not force:
        return _Edit(shown, path, old, text, f"{shown}: plots.html_template is {current!r}, kept (--force)")
    if at is None:
        lines.insert(start + 1, setting)
    else:
        lines[at] = setting
    return _Edit(shown, path, old, "".join(lines), f"{done} (dvc plots show works offline)")


def _modes(root: Path, changes: list[_Edit], force: bool) -> dict[Path, int]:
    """The modes of the files init changes (kept); a read-only one is refused without ``force``, and a file
    where a folder is needed is refused before anything is written."""
    modes = {}
    for e in changes:
        if e.old is not None:
            mode = stat.S_IMODE(e.path.stat().st_mode)
            if (not mode & 0o222 or not os.access(e.path, os.W_OK)) and not force:
                raise ConfigError(
                    f"{e.shown} is read-only (mode {mode:04o}): trackeval init would change it; make it writable, "
                    f"or pass --force (it is rewritten and keeps mode {mode:04o}); nothing was written"
                )
            modes[e.path] = mode
            continue
        folder = next(f for f in e.path.parents if f.exists() or f == f.parent)
        if not folder.is_dir():
            shown = folder.relative_to(root) if folder.is_relative_to(root) else folder
            raise ConfigError(
                f"{shown} is a file, not a folder: trackeval init needs a folder there for {e.shown}; "
                "nothing was written"
            )
    return modes


#: the files init writes that belong in git (DVC git-ignores the cached outputs itself)
COMMIT_NOW = (PARAMS, DVC, ".gitignore", ".dvc/config", ".dvc/plots/", WORKFLOW.as_posix())
#: the outputs of the evaluate stages that DVC does not cache (``cache: false``): committed after ``dvc repro``,
#: so ``dvc metrics diff`` and ``dvc plots diff`` read them from git in review
COMMIT_AFTER_REPRO = ("metrics.json", "headline.json", "plot.csv", "plots/")


def next_steps(root: Path) -> list[str]:
    """What to do after :func:`init`: the inputs to edit, the files to commit now and after ``dvc repro``, how
    to add a version, and how to open the MLflow UI (for a local store: the ``mlflow ui`` command that serves it,
    beside the address; for a server: its address without userinfo). Reads ``root/params.yaml``'s tracking
    section (the user's, when init kept it)."""
    uri = load_config(root / PARAMS).tracking.uri
    if uri.startswith(("http://", "https://")):
        ui = f"MLflow UI: {redact_uri(without_userinfo(uri))}"
    else:
        ui = f"MLflow UI: run `mlflow ui --backend-store-uri {redact_uri(uri)}`, then open http://127.0.0.1:5000"
    after = ", ".join(f"work/eval/*/*/{name}" for name in COMMIT_AFTER_REPRO)
    return [
        "next: edit the inputs under pipeline.evaluations in params.yaml, then `dvc repro` and "
        "`trackeval pipeline verdict`",
        f"commit now: {' '.join(COMMIT_NOW)}",
        f"commit after `dvc repro`: dvc.lock and the outputs DVC does not cache (cache: false) {after} "
        "(`dvc metrics diff` and `dvc plots diff` read them from git; DVC git-ignores the cached ones)",
        "add a version: append it to pipeline.versions in params.yaml (every trackeval stage follows), and its "
        "plot.csv to each trackeval_* plot in dvc.yaml to draw it there (docs/pipeline.md, 'Add a version')",
        f"{ui} (the track stage prints the experiment's link)",
    ]


def init(root: Path, p: Plan, *, force: bool = False) -> list[str]:
    """Set up trackeval's stages in the repository at ``root`` (module docstring); one line per file.

    One transaction: every file is planned and every input checked first, then the changed files are written
    as one set (:func:`trackeval.io.atomic.write_files`: temporaries, then renames, undone on any failure), so
    on any error nothing changed. Symbolic links are written through to their targets; modes are kept.

    Raises:
        ConfigError: ``root`` is not a git repository, a trackeval stage or ``pipeline`` section exists, a file
            to change is read-only (all without ``force``), or a file stands where a folder is needed.
        InputError: params.yaml or dvc.yaml is malformed or of the wrong shape (naming the file and line).
        OSError: a write failed (every file is then as it was).
    """
    if not (root / ".git").exists():
        raise ConfigError(f"{root.resolve().name or root}: not a git repository (run `git init` and `dvc init` first)")
    edits = [_params_yaml(root, p, force), _dvc_yaml(root, p, force), _gitignore(root), _workflow(root, p, force)]
    edits += [*_templates(root, force), _dvc_config(root, force)]
    changes = [e for e in edits if e.new != e.old]
    modes = _modes(root, changes, force)
    write_files({e.path: e.new.encode("utf-8") for e in changes}, modes=modes)
    return [e.line for e in edits]
