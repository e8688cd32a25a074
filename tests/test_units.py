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
    from trackeval.benchmarks.discovery import by_benchmark, units

    assert sorted(units()) == ["imis", "mir3d", "umd", "xray/cls", "xray/loc", "xray/report", "xray/ret", "xray/seg"]
    assert sorted(by_benchmark()) == ["imis", "mir3d", "umd", "xray"]


# --- import layers -----------------------------------------------------------------------------------------------

#: Which of trackeval's top-level packages/modules each one may import (itself always allowed). Leaf modules
#: (errors, results, spec, config) may be imported from everywhere except ``metrics``.
LEAVES = {"errors", "results", "spec", "config", "__init__"}
ALLOWED: dict[str, set[str]] = {
    "metrics": set(),
    "stats": {"metrics"},
    "io": set(),
    "engine": {"io"},
    "audit": {"io"},
    "interactive": {"metrics", "io", "engine"},
    "benchmarks": {"metrics", "io", "stats", "engine", "audit", "interactive"},
    "gate": {"stats", "metrics"},
    "report": {"gate", "stats", "metrics", "io"},  # io.escape: each medium's one escaping function
    "tracking": {"io", "gate", "report", "stats", "metrics"},
    "api": {"benchmarks", "gate", "stats", "metrics", "io", "engine", "audit", "interactive"},
    "demo": {"metrics", "io", "engine", "interactive", "stats", "benchmarks"},
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] != "__version__" else "__init__"


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


def test_import_layers() -> None:
    """metrics -> nothing of ours; benchmarks -> metrics/io/stats/results/config/engine...; gate, report and
    tracking never import benchmarks, api, commands, cli or pipeline; cli, commands and pipeline are on top."""
    violations = []
    for module, imported in sorted(_imports().items()):
        layer = _layer(module)
        if layer in ("cli", "commands", "pipeline") or module == "trackeval":  # the top; the lazy facade
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
