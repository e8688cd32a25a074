"""``trackeval init``: trackeval's stages in a repository's own DVC pipeline, after the repository's own stages.

Writes, in the repository root (``--root``, default the current folder), only what is missing:

- ``dvc.yaml``: one ``trackeval_evaluate_<evaluation>`` stage per unit (``foreach`` version), then
  ``trackeval_track`` and ``trackeval_gate`` (both ``always_changed``: the MLflow registry is outside DVC's
  view). The evaluate stage depends on the unit's inputs, so DVC runs it after the repository's own stage that
  writes the predictions. An existing dvc.yaml keeps its stages and comments (DVC's own YAML round-trip); a
  trackeval stage already there is refused without ``--force``.
- ``params.yaml``: the trackeval sections that are not there yet (``pipeline``: model name, versions, each
  evaluation's inputs with ``{version}`` placeholders; ``bootstrap``, ``tracking``, ``gate`` and the units'
  sections with their defaults), appended as text, so the repository's own sections and comments stay.
- ``.gitignore``: the local MLflow store, its lock, the case cache and the gate's machine-local verdict.
- ``.github/workflows/trackeval.yml``: ``dvc repro`` then ``trackeval pipeline verdict`` (the job fails, at the
  step that prints why, when the candidate does not pass the gate).
- ``.dvc/plots/trackeval_*.json``: Vega-Lite templates that keep the CIs (whiskers on bars, bands on lines, the
  readers' points on the ROC), and one ``plots:`` entry per evaluation in dvc.yaml using them.

Nothing is overwritten without ``--force``; :func:`init` returns one line per file saying what it did.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trackeval.errors import ConfigError
from trackeval.io.atomic import atomic_path

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
IGNORED = (".trackeval-cache/", "mlflow.db", "mlflow.db.trackeval.lock", "mlartifacts/", "work/gate/")
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
    from trackeval.registry import unit

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
    from trackeval.registry import unit

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
    """The trackeval stages of dvc.yaml (DVC's ``foreach``/``${item}`` syntax)."""
    from trackeval.registry import unit

    stages: dict[str, Any] = {}
    for evaluation, unit_name in p.evaluations.items():
        deps = [v.replace("{version}", "${item}") for v in _inputs(evaluation, unit_name).values()]
        out = f"work/eval/{evaluation}/${{item}}"
        stages[f"trackeval_evaluate_{evaluation}"] = {
            "foreach": list(p.versions),
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


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


#: what init writes: ``(path, new text, the line it prints)``
_Edit = tuple[Path, str, str]


def _dvc_yaml(root: Path, p: Plan, force: bool) -> _Edit:
    """``dvc.yaml`` with the trackeval stages added (created when missing), its stages and comments kept."""
    try:
        from ruamel.yaml import YAML
    except ImportError as exc:  # DVC depends on ruamel.yaml: without it there is no DVC either
        raise ConfigError("trackeval init needs DVC: pip install 'medtrackeval[demo]'") from exc
    path = root / "dvc.yaml"
    rt = YAML()
    tree = rt.load(path.read_text(encoding="utf-8")) if path.exists() else None
    tree = tree if tree is not None else {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path.name} must hold a mapping at the top level")
    stages = tree.setdefault("stages", {})
    ours = _stages(p)
    clash = sorted(set(stages) & set(ours))
    if clash and not force:
        raise ConfigError(f"{path.name} already has stage(s) {clash}: run `trackeval init --force` to replace them")
    for name, stage in ours.items():
        stages[name] = stage
    plots = _plots(p)
    names = [n for d in plots for n in d]
    theirs = [x for x in tree.get("plots") or [] if not (isinstance(x, dict) and set(x) & set(names))]
    tree["plots"] = [*theirs, *plots]  # the repository's own plots stay, trackeval's are replaced
    buf = io.StringIO()
    rt.dump(tree, buf)
    return (
        path,
        buf.getvalue(),
        f"{path.name}: stages {', '.join(ours)}" + (f"; plots {', '.join(names)}" if names else ""),
    )


def _plots(p: Plan) -> list[dict[str, Any]]:
    """One DVC plot per evaluation whose first declared plot has a trackeval template: every version's
    ``plot.csv`` on one chart, with its CIs (:data:`PLOT_TEMPLATES`)."""
    from trackeval.registry import unit

    out = []
    for evaluation, unit_name in p.evaluations.items():
        plots = unit(unit_name).plots
        if not plots or plots[0].kind not in PLOT_TEMPLATES:
            continue
        template, x, y = (f.format(dimension=plots[0].dimension) for f in PLOT_TEMPLATES[plots[0].kind])
        files = {f"work/eval/{evaluation}/{v}/plot.csv": y for v in p.versions}
        out.append({f"trackeval_{evaluation}": {"template": template, "x": x, "y": files}})
    return out


def _templates(root: Path, force: bool) -> list[_Edit]:
    """trackeval's plot templates in ``.dvc/plots/`` (an existing one that differs is kept without ``force``)."""
    out = []
    for src in sorted(TEMPLATES.glob("*.json")):
        path = root / ".dvc" / "plots" / src.name
        text = src.read_text(encoding="utf-8")
        if path.exists() and path.read_text(encoding="utf-8") != text and not force:
            out.append((path, path.read_text(encoding="utf-8"), f".dvc/plots/{src.name}: differs, kept (--force)"))
        else:
            out.append((path, text, f".dvc/plots/{src.name}: written"))
    return out


def _default_sections(p: Plan) -> dict[str, Any]:
    """``pipeline`` for the plan, then the shared and the units' config sections with their defaults."""
    from trackeval.api import load_config
    from trackeval.registry import unit

    defaults = load_config().model_dump(mode="json")
    evaluations = {e: {"unit": u, "inputs": _inputs(e, u)} for e, u in p.evaluations.items()}
    out: dict[str, Any] = {
        "pipeline": {"model_name": p.model, "versions": list(p.versions), "evaluations": evaluations}
    }
    for section in (*SHARED_SECTIONS, *(unit(u).config_section for u in p.evaluations.values())):
        out[section] = defaults[section]
    return out


def _read_params(path: Path, force: bool) -> tuple[str, dict[str, Any]]:
    """``params.yaml``'s text and tree ("" and {} when missing). An existing ``pipeline`` section is refused
    without ``force``; with it, the section is dropped (the file re-dumped without it: its comments are lost)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    tree = yaml.safe_load(text) if text.strip() else {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path.name} must hold a mapping at the top level")
    if "pipeline" in tree:
        if not force:
            raise ConfigError(
                f"{path.name} already has a 'pipeline' section: run `trackeval init --force` to replace it"
            )
        tree = {k: v for k, v in tree.items() if k != "pipeline"}
        text = yaml.safe_dump(tree, sort_keys=False) if tree else ""
    return text, tree


def _params_yaml(root: Path, p: Plan, force: bool) -> _Edit:
    """``params.yaml`` with the missing trackeval sections appended (created when missing); its text stays."""
    path = root / "params.yaml"
    text, tree = _read_params(path, force)
    added = {k: v for k, v in _default_sections(p).items() if k not in tree}
    block = "# trackeval (trackeval init): its stages read these sections; docs/own-pipeline.md\n"
    block += yaml.safe_dump(added, sort_keys=False, default_flow_style=None)
    new = (text.rstrip("\n") + "\n\n" if text.strip() else "") + block
    kept = f" (kept yours: {', '.join(tree)})" if tree else ""
    return path, new, f"{path.name}: sections {', '.join(added)}{kept}"


def _gitignore(root: Path) -> _Edit:
    path = root / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    have = {line.strip() for line in text.splitlines()}
    missing = [line for line in IGNORED if line not in have]
    new = text + ("\n" if text and not text.endswith("\n") else "") + "".join(f"{m}\n" for m in missing)
    return path, new, f".gitignore: {'added ' + ', '.join(missing) if missing else 'nothing missing'}"


def _workflow_text(p: Plan) -> str:
    from trackeval._version import __version__

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
    path = root / WORKFLOW
    if path.exists() and not force:
        return path, path.read_text(encoding="utf-8"), f"{WORKFLOW.as_posix()}: exists, kept (--force replaces it)"
    return path, _workflow_text(p), f"{WORKFLOW.as_posix()}: written"


def init(root: Path, p: Plan, *, force: bool = False) -> list[str]:
    """Set up trackeval's stages in the repository at ``root`` (module docstring); one line per file.

    Raises:
        ConfigError: ``root`` is not a git repository, a file is not a YAML mapping, or a trackeval stage or
            ``pipeline`` section exists (without ``force``). Nothing is written then.
    """
    if not (root / ".git").exists():
        raise ConfigError(f"{root.resolve().name or root}: not a git repository (run `git init` and `dvc init` first)")
    edits = [_params_yaml(root, p, force), _dvc_yaml(root, p, force), _gitignore(root), _workflow(root, p, force)]
    edits += _templates(root, force)
    for path, text, _ in edits:  # every check passed: now write
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            _write(path, text)
    return [line for _, _, line in edits]
