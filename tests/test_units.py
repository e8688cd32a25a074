"""Benchmark units: a third-party plug-in benchmark end to end, the light ``--help``, the import layers.

The plug-in (``tests/plugins/toybench``) is installed the way pip installs a package: the module plus a
``*.dist-info`` folder with its ``entry_points.txt``, on ``PYTHONPATH`` of subprocesses only; nothing in
trackeval is edited and the test environment is left as it was.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import scaled

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "trackeval"
HEAVY = ("torch", "monai", "mlflow", "dask", "distributed", "dvc")


def _env(extra_path: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra_path), env.get("PYTHONPATH", "")) if p)
    return env


def _cli(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trackeval.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(600),
    )


# --- the toy plug-in ------------------------------------------------------------------------------------------


def _install_toy(site: Path) -> None:
    shutil.copytree(REPO / "tests" / "plugins" / "toybench", site / "toybench")
    dist = site / "toybench-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toybench\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[trackeval.benchmarks]\ntoy = toybench:SPEC\n", encoding="utf-8")


def _toy_data(root: Path) -> dict[str, Path]:
    """40 cases on sites a/b; v1 labels 28 correctly (70%), v2 the same 28 and 8 more (90%)."""
    root.mkdir(parents=True)
    ids = [f"c{i:02d}" for i in range(40)]
    truth = root / "truth.csv"
    truth.write_text("case_id,site,label\n" + "".join(f"{c},{'ab'[i % 2]},{i % 3}\n" for i, c in enumerate(ids)))
    out = {"truth": truth}
    for version, n_right in (("v1", 28), ("v2", 36)):
        p = root / f"pred_{version}.csv"
        p.write_text("case_id,label\n" + "".join(f"{c},{i % 3 if i < n_right else 9}\n" for i, c in enumerate(ids)))
        out[version] = p
    return out


@pytest.mark.slow
def test_toy_plugin_is_evaluated_tracked_compared_gated_and_drawn(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    site = tmp_path / "site"
    _install_toy(site)
    env = _env(site)
    data = _toy_data(tmp_path / "data")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = ["--set", f"tracking.uri={store}", "--set", f"tracking.artifact_location={tmp_path / 'artifacts'}"]

    shown = _cli(tmp_path, env, "evaluate", "--help")
    assert shown.returncode == 0 and "toy: fraction of correctly labelled cases" in shown.stdout
    toy_help = _cli(tmp_path, env, "evaluate", "toy", "--help").stdout
    assert "--ground-truth PATH" in toy_help and "truth.csv: case_id,site,label" in toy_help

    common = ["--ground-truth", str(data["truth"]), "--executor", "local", "--model-name", "toy"]
    v1 = [*common, "--predictions", str(data["v1"])]
    assert _cli(tmp_path, env, "evaluate", "toy", *v1, "--out", "x").returncode == 0  # the section has defaults
    bad = _cli(tmp_path, env, "evaluate", "toy", *v1, "--out", "y", "--set", "toy.min_cases=0")
    assert bad.returncode == 2 and "field toy.min_cases" in bad.stderr and "greater than 0" in bad.stderr
    typo = _cli(tmp_path, env, "evaluate", "toy", *v1, "--out", "z", "--set", "toy.min_case=3")
    assert typo.returncode == 2 and "toy.min_case" in typo.stderr

    for version in ("v1", "v2"):
        args = [*common, "--predictions", str(data[version]), "--model-version", version, "--out", f"out/{version}"]
        done = _cli(tmp_path, env, "evaluate", "toy", *args)
        assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out" / "v2" / "results.json").read_text())
    assert result["aggregates"]["toy/accuracy"]["value"] == pytest.approx(0.9)
    (plot,) = result["plots"]
    assert (plot["metric"], plot["dimension"], plot["kind"]) == ("accuracy", "site", "bar")

    tracked = _cli(tmp_path, env, "track", "out/v1", "out/v2", *tracking)
    assert tracked.returncode == 0, tracked.stderr
    assert tracked.stderr.count("toy toy/v") == 2 and "logged as run" in tracked.stderr

    compared = _cli(tmp_path, env, "compare", "toy/v2", "toy/v1", *tracking, "--markdown", "cmp.md")
    assert compared.returncode == 0, compared.stderr
    table = (tmp_path / "cmp.md").read_text()
    assert "## toy/accuracy: A = toy/v2, B = toy/v1" in table and "| site=a | 0.9000 | 0.7000 | +0.2000" in table

    first = _cli(tmp_path, env, "promote", "--model", "toy", "--candidate", "v1", *tracking)
    assert first.returncode == 0, first.stdout + first.stderr
    # a first version is held to the floor with the conservative end of its CI (accuracy 0.7000)
    floor = re.search(r"toy/accuracy ci95_low (0\.\d{4}) >= 0\.5", first.stdout)
    assert floor is not None and 0.5 <= float(floor[1]) < 0.7, first.stdout
    second = _cli(tmp_path, env, "promote", "--model", "toy", "--candidate", "v2", *tracking)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "toy/accuracy" in second.stdout and "need lower bound > -0.05" in second.stdout

    client = MlflowClient(tracking_uri=store, registry_uri=store)
    assert client.get_model_version_by_alias("toy", "champion").tags["trackeval.model_version"] == "v2"
    mv = client.get_model_version_by_alias("toy", "champion")
    run_id = mv.tags["trackeval.eval_run.toy"]
    run = client.get_run(run_id)
    assert run.data.tags["trackeval.unit"] == "toy" and run.info.run_name == "toy toy/v2"
    assert run.data.metrics["toy/accuracy"] == pytest.approx(0.9)
    figures = {a.path for a in client.list_artifacts(run_id, "figures")}
    assert "figures/toy__accuracy__by_site.png" in figures
    report = Path(client.download_artifacts(run_id, "report.html", str(tmp_path / "dl"))).read_text()
    assert "toy/accuracy by site (toy/v2)" in report or report.count("data:image/png;base64,") >= 1


def test_broken_plugin_is_a_one_line_error(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist = site / "broken-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[trackeval.benchmarks]\nbroken = no_such_module:SPEC\n")
    done = _cli(tmp_path, _env(site), "evaluate", "--help")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "cannot load benchmark entry point broken = no_such_module:SPEC" in done.stderr


# --- light --help ------------------------------------------------------------------------------------------------


def test_help_imports_no_heavy_module() -> None:
    """``trackeval --help`` and every ``<cmd> --help`` build the parser from the unit declarations only."""
    commands = [
        [],
        ["evaluate"],
        ["evaluate", "umd"],
        ["evaluate", "xray"],
        ["evaluate", "imis"],
        ["evaluate", "mir3d"],
        ["audit", "umd"],
    ]
    commands += [[c] for c in ("demo", "audit", "data", "track", "promote", "compare", "pipeline")]
    code = (
        "import sys, contextlib, io\n"
        "from trackeval.cli import main\n"
        f"for argv in {commands!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main([*argv, '--help'])\n"
        "        except SystemExit as e:\n"
        "            assert e.code == 0, (argv, e.code)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_every_builtin_unit_is_registered_through_its_entry_point() -> None:
    from trackeval.registry import by_benchmark, units

    assert sorted(units()) == ["imis", "mir3d", "umd", "xray/cls", "xray/loc", "xray/report", "xray/ret", "xray/seg"]
    assert sorted(by_benchmark()) == ["imis", "mir3d", "umd", "xray"]


# --- import layers -----------------------------------------------------------------------------------------------

#: Which of trackeval's top-level packages/modules each one may import (itself always allowed). Leaf modules
#: (errors, results, spec, config, _version, registry: the registered units' declarations, loaded through entry
#: points, never a static import of an adapter) may be imported from everywhere except ``metrics``; a built-in
#: unit's config section (``trackeval.benchmarks.<unit>.config``, or ``<unit>_config``) lives beside its adapter
#: but belongs to the ``config`` layer (it imports only ``trackeval.config``:
#: :func:`test_config_sections_import_only_config`).
LEAVES = {"errors", "results", "case_table", "spec", "config", "_version", "registry", "__init__", "_moved"}
SECTION = re.compile(r"^trackeval\.benchmarks\.[a-z0-9]+(?:_|\.)config(?:\.|\Z)")  # the module, or a name in it
ALLOWED: dict[str, set[str]] = {
    "metrics": set(),
    "stats": {"metrics"},
    "io": {"stats"},  # the results folder verifies aggregates against the case records (stats.verify)
    "engine": {"io"},
    "audit": {"io"},
    "benchmarks": {"metrics", "io", "stats", "engine", "audit"},
    "gate": {"stats", "metrics", "io"},  # io.escape only: escape_html for the notebook view (gate.display)
    "plotdata": {"metrics", "stats"},  # the rows behind figures: curves and bins through the metric kernels
    # the report draws and prints what results hold: it computes no metric (no metrics/, no stats/)
    # signed decisions (keys, DSSE, in-toto statements) and the audit trail's data: no store, no terminal
    "attest": {"gate", "io"},
    "report": {"gate", "io", "plotdata", "attest"},  # io.escape: each medium's one escaping function
    "tracking": {"io", "gate", "report", "plotdata", "stats", "metrics", "attest"},
    # the Python API: evaluate, and the loop the track/compare/promote/verify commands run, without the terminal
    "api": {"benchmarks", "gate", "stats", "metrics", "io", "engine", "audit", "tracking", "attest"},
    "demo": {"metrics", "io", "engine", "stats", "benchmarks"},
    # the MLflow evaluator plug-in: a unit's inputs from MLflow's dataset, scored by the API, logged by tracking
    "mlflow_evaluator": {"api", "tracking", "io"},
}


def _layer(module: str) -> str:
    if SECTION.match(module):
        return "config"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports() -> dict[str, set[str]]:
    """``{module: {imported trackeval modules}}`` for every module, including imports inside functions."""
    out: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found |= {n for n in names if n.split(".")[0] == "trackeval"}
        out[module] = found
    return out


def _submodule(name: str) -> bool:
    """``trackeval.X`` is a module or package of trackeval (not an attribute of the package top)."""
    rel = SRC.joinpath(*name.split(".")[1:])
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def test_nothing_imports_from_the_package_top() -> None:
    """``from trackeval import __version__`` (or any attribute of the lazy facade) inside the package runs the
    layers backwards: the version is :mod:`trackeval._version`, a leaf."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path == SRC / "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "trackeval" and node.level == 0:
                offenders += [
                    f"{path.relative_to(SRC)}: {a.name}" for a in node.names if not _submodule(f"trackeval.{a.name}")
                ]
    assert offenders == []


def test_config_sections_import_only_config() -> None:
    """A unit's config section module is a leaf of the config layer: it imports ``trackeval.config`` (and
    ``trackeval.errors``) only, so every layer may use its model."""
    sections = {m: i for m, i in _imports().items() if SECTION.match(m)}
    assert {"trackeval.benchmarks.umd.config", "trackeval.benchmarks.imis.config"} <= set(sections)
    for module, imported in sections.items():
        assert {t for t in imported if _layer(t) not in ("config", "errors", "_moved")} == set(), module


#: Former module paths kept as aliases of their new home (model references users wrote keep resolving); each
#: forwards names lazily through the one mechanism, :mod:`trackeval._moved`, and holds no code of its own.
ALIASES = {
    "trackeval.loop": "trackeval.api",
    "trackeval.interactive": None,  # the package of the aliases below: a docstring only
    "trackeval.interactive.baselines": "trackeval.demo.baselines",
    "trackeval.interactive.protocol": "trackeval.benchmarks.imis.protocol",
    "trackeval.interactive.runner": "trackeval.benchmarks.imis.runner",
    "trackeval.benchmarks.imis_config": "trackeval.benchmarks.imis.config",
    "trackeval.benchmarks.umd_config": "trackeval.benchmarks.umd.config",
    "trackeval.benchmarks.mir3d_config": "trackeval.benchmarks.mir3d.config",
    "trackeval.benchmarks.xray_config": "trackeval.benchmarks.xray.config",
}


def test_import_layers() -> None:
    """metrics -> nothing of ours; benchmarks -> metrics/io/stats/results/config/engine...; gate, report and
    tracking never import benchmarks, api, commands, cli or pipeline; the report imports neither metrics nor
    stats; cli, commands and pipeline are on top."""
    violations = []
    for module, imported in sorted(_imports().items()):
        layer = _layer(module)
        if layer in ("cli", "commands", "pipeline") or module == "trackeval":  # the top; the lazy facade
            continue
        if module in ALIASES:
            assert {t for t in imported if not t.startswith("trackeval._moved")} == set(), module
            source = SRC.joinpath(*module.split(".")[1:]).with_suffix(".py")
            assert ALIASES[module] is None or f'forwarder("{module}", "{ALIASES[module]}"' in source.read_text(), module
            continue
        allowed = ALLOWED.get(layer)
        assert allowed is not None or layer in LEAVES, f"{module}: no layer rule for {layer!r}"
        for target in sorted(imported):
            t = _layer(target)
            if t == layer or (t in LEAVES and layer != "metrics") or t == "__init__":
                continue
            if layer in LEAVES:
                if t not in LEAVES:
                    violations.append(f"{module} -> {target}")
            elif t not in allowed:
                violations.append(f"{module} -> {target}")
    assert violations == []


def test_no_import_cycles_between_modules() -> None:
    """The module graph (every import, also inside functions) has no cycle."""
    graph = {m: i for m, i in _imports().items() if m != "trackeval"}  # the facade imports the API lazily
    modules = set(graph)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name if name in modules else None

    edges = {m: {r for n in imported if (r := resolve(n)) and r != m} for m, imported in graph.items()}
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in edges.items()}  # a package's own parents
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, path: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle.extend(path[path.index(nxt) :] + [nxt] if nxt in path else [node, nxt])
                return True
            if nxt not in state and visit(nxt, [*path, nxt]):
                return True
        state[node] = 2
        return False

    for m in sorted(edges):
        if m not in state and visit(m, [m]):
            break
    assert cycle == []


def test_one_class_per_public_name() -> None:
    """A public (non-underscore) class name is defined once under src/trackeval: a name says which class."""
    homes: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                homes.setdefault(node.name, []).append(str(path.relative_to(SRC)))
    assert {name: paths for name, paths in homes.items() if len(paths) > 1} == {}


# --- discovery checks and the spec hooks (in-process plug-ins) -----------------------------------------------------

#: a plug-in module built on toybench's unit: ``{spec}`` is the keyword arguments replaced in its SPEC
PLUGIN = """
from dataclasses import replace
from pathlib import Path

from toybench import SPEC as TOY
from trackeval.spec import AuditFinding, AuditReport, PrimaryMetric


def audit(inputs, cfg, train_manifest):
    train = {{line.split(",")[0] for line in train_manifest.read_text().splitlines()[1:]}}
    test = {{line.split(",")[0] for line in inputs.ground_truth.read_text().splitlines()[1:]}}
    shared = sorted(train & test)
    note = f"case overlap: {{', '.join(shared)}} [bold]x[/]" if shared else ""
    return AuditReport((AuditFinding("n_case_overlap", len(shared), note),), (f"{{len(test)}} test case(s) [red]",))


def example():
    return {{"ground_truth": Path("truth.csv"), "predictions": Path("pred.csv")}}


def evaluate_two(inputs, cfg):
    raise AssertionError


SPEC = replace(TOY, {spec})
"""


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[[str, str], None]]:
    """``plugin(name, spec_kwargs)`` registers module ``name`` (:data:`PLUGIN`) as entry point ``name =
    name:SPEC`` beside the installed units, for this test only (the caches of the units and of the composed
    config model are cleared on the way in and out)."""
    from importlib.metadata import EntryPoint

    from trackeval import api
    from trackeval import registry as discovery

    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(REPO / "tests" / "plugins"))
    installed = discovery.entry_points
    extra: list[EntryPoint] = []
    monkeypatch.setattr(discovery, "entry_points", lambda group: [*installed(group=group), *extra])

    def add(name: str, spec: str) -> None:
        (site / f"{name}.py").write_text(PLUGIN.format(spec=spec), encoding="utf-8")
        extra.append(EntryPoint(name, f"{name}:SPEC", discovery.ENTRY_POINT_GROUP))
        discovery.units.cache_clear()
        api.config_model.cache_clear()

    yield add
    discovery.units.cache_clear()
    api.config_model.cache_clear()
    for module in ["toybench", *(ep.name for ep in extra)]:
        sys.modules.pop(module, None)


def _toy_files(root: Path) -> tuple[Path, Path, Path]:
    truth, pred, train = root / "truth.csv", root / "pred.csv", root / "train.csv"
    truth.write_text("case_id,site,label\nc1,a,1\nc2,b,0\n", encoding="utf-8")
    pred.write_text("case_id,label\nc1,1\nc2,1\n", encoding="utf-8")
    train.write_text("case_id\nc2\nc9\n", encoding="utf-8")
    return truth, pred, train


def test_a_spec_naming_an_undeclared_metric_cannot_be_built() -> None:
    from dataclasses import replace

    from trackeval.registry import unit
    from trackeval.results import PlotSpec
    from trackeval.spec import PrimaryMetric

    umd = unit("umd")
    for change in (
        {"primary": PrimaryMetric("recall")},
        {"summary_metrics": ("dsc", "recall")},
        {"plots": (PlotSpec(metric="recall", dimension="organ"),)},
    ):
        with pytest.raises(ValueError, match=r"umd: metric 'recall' is not declared in metrics \(declared: dsc, "):
            replace(umd, **change)


def test_a_plugin_with_an_undeclared_metric_is_a_one_line_config_error(plugin) -> None:
    from trackeval.errors import ConfigError
    from trackeval.registry import units

    plugin("undeclared", 'name="undeclared", primary=PrimaryMetric("recall")')
    with pytest.raises(ConfigError) as err:
        units()
    message = str(err.value)
    assert message.startswith("cannot load benchmark entry point undeclared = undeclared:SPEC: ")
    assert "metric 'recall' is not declared in metrics (declared: accuracy)" in message and "\n" not in message


def test_evaluate_of_the_wrong_signature_is_a_one_line_config_error(plugin, capsys) -> None:
    from trackeval.cli import main

    plugin("twoargs", 'name="twoargs", evaluate=evaluate_two')
    assert main(["evaluate", "--help"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "benchmark unit 'twoargs' (entry point twoargs): evaluate must take (inputs, config, model)" in err


def test_a_hook_that_is_not_a_reference_is_a_config_error(plugin) -> None:
    from trackeval.errors import ConfigError
    from trackeval.registry import units

    plugin("badhook", 'name="badhook", audit="not a reference"')
    with pytest.raises(ConfigError, match=r"'badhook' .*: audit must be a callable or 'module:function', got "):
        units()


@pytest.mark.parametrize("hook", ["audit", '"hooked:audit"'])
def test_a_plugin_audit_runs_through_trackeval_audit(plugin, tmp_path: Path, capsys, hook: str) -> None:
    from trackeval.cli import main

    plugin("hooked", f'name="hooked", audit={hook}')
    truth, pred, train = _toy_files(tmp_path)
    argv = ["audit", "hooked", "--ground-truth", str(truth), "--predictions", str(pred), "--train-manifest", str(train)]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "n_case_overlap: 1 case overlap: c2 [bold]x[/]" in out  # the hook's text is printed, never markup
    assert "2 test case(s) [red]" in out
    train.write_text("case_id\nc9\n", encoding="utf-8")
    assert main(argv) == 0
    assert "n_case_overlap: 0" in capsys.readouterr().out


def test_an_audit_reference_that_cannot_load_is_a_one_line_error(plugin, tmp_path: Path, capsys) -> None:
    from trackeval.cli import main

    plugin("lost", 'name="lost", audit="no_such_module:audit"')
    truth, pred, train = _toy_files(tmp_path)
    argv = ["audit", "lost", "--ground-truth", str(truth), "--predictions", str(pred), "--train-manifest", str(train)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "benchmark unit 'lost': cannot load its audit no_such_module:audit: No module named" in err
    assert err.count("\n") == 1


def test_units_without_an_audit_have_no_audit_subcommand(capsys) -> None:
    from trackeval.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["audit", "mir3d", "--help"])
    assert exit_.value.code == 2 and "invalid choice: 'mir3d'" in capsys.readouterr().err


def test_demo_evaluates_the_example_of_the_unit_asked_for(plugin, tmp_path: Path, capsys) -> None:
    from trackeval.cli import main
    from trackeval.registry import hook, unit, with_hook

    assert [s.name for s in with_hook("example")] == ["umd"]
    assert set(hook(unit("umd"), "example")()) == {"ground_truth", "predictions"}
    plugin("exampled", "example=example")  # the unit toy, with an example
    _toy_files(tmp_path)  # the example's relative paths, in the test's working folder
    argv = ["demo", "--unit", "toy", "--out", "out", "--executor", "local", "--set", "bootstrap.n_resamples=20"]
    assert main(argv) == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "results.json").read_text())["benchmark"] == "toy"


def test_the_former_baselines_path_is_a_lazy_alias() -> None:
    """``--model trackeval.interactive.baselines:region_grower`` (written before the demo models moved to
    ``trackeval.demo.baselines``) still resolves, to the same object, with a DeprecationWarning; an unknown name
    is an AttributeError."""
    from trackeval.demo import baselines
    from trackeval.interactive import baselines as alias

    with pytest.warns(DeprecationWarning, match="use trackeval.demo.baselines"):
        assert alias.region_grower is baselines.region_grower and alias.RegionGrower is baselines.RegionGrower
    with pytest.raises(AttributeError):
        alias.no_such_model  # noqa: B018


@pytest.mark.parametrize(("module", "name"), [("protocol", "Request"), ("runner", "write_log")])
def test_the_former_interactive_paths_are_deprecated_aliases(module: str, name: str) -> None:
    """``trackeval.interactive.protocol`` and ``.runner`` (named by the docs before IMIS became one package)
    forward to ``trackeval.benchmarks.imis``, to the same objects, with a DeprecationWarning."""
    import importlib

    new = importlib.import_module(f"trackeval.benchmarks.imis.{module}")
    alias = importlib.import_module(f"trackeval.interactive.{module}")
    with pytest.warns(DeprecationWarning, match=f"use trackeval.benchmarks.imis.{module}"):
        assert getattr(alias, name) is getattr(new, name)
    with pytest.raises(AttributeError):
        alias.no_such_name  # noqa: B018


def test_the_former_runner_path_still_runs() -> None:
    """``python -m trackeval.interactive.runner`` runs the runner, warning that it moved."""
    args = [sys.executable, "-m", "trackeval.interactive.runner", "--help"]
    done = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m trackeval.benchmarks.imis.runner")
    assert "DeprecationWarning: trackeval.interactive.runner is deprecated" in done.stderr


@pytest.mark.parametrize(
    ("unit", "name"),
    [
        ("umd", "UMDConfig"),
        ("umd", "UMD_ORGANS"),
        ("mir3d", "Mir3dConfig"),
        ("xray", "XRayConfig"),
        ("imis", "IMISConfig"),
    ],
)
def test_the_former_config_section_paths_are_deprecated_aliases(unit: str, name: str) -> None:
    """``trackeval.benchmarks.<unit>_config`` (the path the docs named before each unit became a package) forwards
    to ``trackeval.benchmarks.<unit>.config``, to the same objects, with a DeprecationWarning."""
    import importlib

    new = importlib.import_module(f"trackeval.benchmarks.{unit}.config")
    alias = importlib.import_module(f"trackeval.benchmarks.{unit}_config")
    with pytest.warns(DeprecationWarning, match=f"use trackeval.benchmarks.{unit}.config"):
        assert getattr(alias, name) is getattr(new, name)
    with pytest.raises(AttributeError):
        alias.no_such_name  # noqa: B018
