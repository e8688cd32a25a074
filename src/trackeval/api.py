"""The Python API, its one front door: evaluate a benchmark unit and build the configuration (:func:`evaluate`,
:func:`load_config`); write the results, track them, compare two versions, promote a candidate through the gate
and verify a model's aliases (:func:`write_results`, :func:`track`, :func:`compare`, :func:`promote`,
:func:`verify`). The lazy facade :mod:`trackeval` exposes each under its name (``trackeval.evaluate``).

The CLI (``trackeval evaluate``) and the DVC pipeline both call :func:`evaluate`; nothing else runs a benchmark.

Each function is what the CLI command of the same name runs, returns the typed object that command prints, and
raises the command's errors as exceptions (:class:`~trackeval.errors.TrackevalError`: ``InputError``,
``ConfigError``, ``TrackingError``): nothing here prints or exits. A failing gate is not an error: ``promote``
returns the :class:`~trackeval.gate.decide.Decision` with ``verdict == "fail"`` (the CLI's exit 1).

``config`` is the :func:`trackeval.load_config` object (its ``tracking`` section names the MLflow store: the
``MLFLOW_TRACKING_URI`` environment variable, else ``tracking.uri``); None builds the defaults.

Inside an active MLflow run (a training script's ``with mlflow.start_run():``), :func:`track` links the
evaluation to it both ways: the active run gets the tag ``trackeval.evaluation_run`` (the version's trackeval
parent run) and the headline metrics with their CIs (``umd/dsc``, ``umd/dsc/ci95_low`` ...; never the
breakdowns, which stay on the evaluation runs), and the trackeval parent run gets ``trackeval.source_run``. Both
live in the active run's store: ``mlflow.set_tracking_uri`` sets ``MLFLOW_TRACKING_URI``, which trackeval reads
before ``tracking.uri``.

The round trip on a throw-away MLflow store, with the bundled UMD example scored as two versions (v2 makes the
same predictions as v1, so it is not worse)::

    >>> import tempfile, pathlib, trackeval
    >>> from trackeval.demo.umd_example import example_dirs
    >>> store = pathlib.Path(tempfile.mkdtemp())
    >>> cfg = trackeval.load_config(None, ["engine.executor=local", "engine.cache=false",
    ...     f"tracking.uri=sqlite:///{store / 'mlflow.db'}", f"tracking.artifact_location={store / 'artifacts'}",
    ...     f"tracking.dvc_root={store}"])
    >>> gt, pred = example_dirs()
    >>> for version in ("v1", "v2"):
    ...     result = trackeval.evaluate("umd", {"ground_truth": gt, "predictions": pred}, cfg,
    ...                                 {"name": "example", "version": version})
    ...     _ = trackeval.write_results(result, store / version)
    ...     (tracked,) = trackeval.track(store / version, config=cfg)
    >>> tracked.model, tracked.logged
    ('example/v2', True)
    >>> trackeval.promote("example", "v1", config=cfg).verdict  # the first version: held to the floor
    'pass'
    >>> (comparison,) = trackeval.compare("example/v2", "example@champion", config=cfg)
    >>> comparison.rows[0].delta
    0.0
    >>> trackeval.promote("example", "v2", config=cfg).verdict  # no worse than v1 on any organ
    'pass'
    >>> [(s.alias, s.label, s.problem) for s in trackeval.verify("example", config=cfg)]
    [('champion', 'v2', None), ('previous', 'v1', None)]
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from pydantic import BaseModel, ValidationError, create_model

from trackeval.config import EvalConfig, parse_config
from trackeval.errors import ConfigError, InputError, debug_from_env, log_levels
from trackeval.gate.policy import gate_policies
from trackeval.io.results_folder import OUTPUT_FILES, write_outputs
from trackeval.registry import hook, unit, units
from trackeval.results import BenchmarkResult, headline_metrics
from trackeval.spec import BenchmarkSpec
from trackeval.tracking.tags import TAG

if TYPE_CHECKING:  # the loop's functions import the tracking stack on first use: `trackeval.evaluate` stays light
    from trackeval.gate.compare import BenchmarkComparison
    from trackeval.gate.decide import Decision
    from trackeval.tracking.client import Mlflow
    from trackeval.tracking.track import Tracked
    from trackeval.tracking.verification import AliasStatus

__all__ = [
    "check_argument",
    "compare",
    "config_model",
    "evaluate",
    "gate_policies",
    "load_config",
    "promote",
    "track",
    "unit_outputs",
    "validate_inputs",
    "verify",
    "write_results",
]

#: what a path argument may be
PATH_TYPES = (str, os.PathLike)
PATH = "a path (str or pathlib.Path)"
CONFIG = "the configuration trackeval.load_config(...) returns, or None (the defaults)"


def check_argument(
    function: str, parameter: str, value: Any, types: type | tuple[type, ...], accepts: str, *, none: bool = False
) -> None:
    """The Python API's boundary check: a :class:`TypeError` naming ``trackeval.<function>``'s ``parameter``
    and what it ``accepts`` unless ``value`` is one of ``types`` (or ``None``, with ``none``). A bool is never
    taken for an int.

    >>> check_argument("promote", "model", None, str, "a registered model name (str)")
    Traceback (most recent call last):
    TypeError: trackeval.promote(): model must be a registered model name (str), not None
    """
    wanted = types if isinstance(types, tuple) else (types,)
    if (value is None and none) or (isinstance(value, wanted) and not (isinstance(value, bool) and bool not in wanted)):
        return
    shown = "None" if value is None else f"{type(value).__name__} {_short(value)}"
    raise TypeError(f"trackeval.{function}(): {parameter} must be {accepts}, not {shown}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_config(function: str, config: Any) -> None:
    """``config`` is an :class:`EvalConfig` (what :func:`load_config` returns) or ``None``."""
    check_argument(function, "config", config, EvalConfig, CONFIG, none=True)


def _check_overrides(overrides: Any) -> None:
    if overrides is None:
        return
    accepts = "a list of 'key=value' strings, or None"
    if isinstance(overrides, str | bytes) or not isinstance(overrides, Sequence):
        hint = " (one override is a list of one: [...])" if isinstance(overrides, str) else ""
        raise TypeError(
            f"trackeval.load_config(): overrides must be {accepts}{hint}, "
            f"not {type(overrides).__name__} {_short(overrides)}"
        )
    for i, item in enumerate(overrides):
        check_argument("load_config", f"overrides[{i}]", item, str, "a 'key=value' string")


@functools.cache
def config_model() -> type[EvalConfig]:
    """:class:`EvalConfig` with one field per config section declared by the registered units (defaults as
    declared by each section's model)."""
    sections: dict[str, Any] = {}
    for spec in units().values():
        sections.setdefault(spec.config_section, (spec.config_model, spec.config_model()))
    return create_model("EvalConfig", __base__=EvalConfig, **sections)


def load_config(path: Path | str | None = None, overrides: list[str] | None = None) -> EvalConfig:
    """The validated configuration from an optional YAML file (params.yaml layout) and ``key=value`` overrides.

    >>> cfg = load_config(None, ["umd.nsd_tolerance_mm=2"])
    >>> cfg.umd.nsd_tolerance_mm, cfg.bootstrap.n_resamples
    (2.0, 1000)

    Raises:
        TypeError: ``path`` is not a path or None, ``overrides`` not a list of strings (a single string included).
        ConfigError: a bad value or key in the file or an override.
    """
    check_argument("load_config", "path", path, PATH_TYPES, f"{PATH} to a params file, or None", none=True)
    _check_overrides(overrides)
    return parse_config(config_model(), Path(path) if path is not None else None, list(overrides or []))


def validate_inputs(spec: BenchmarkSpec, inputs: BaseModel | Mapping[str, Any]) -> BaseModel:
    """``inputs`` as the unit's inputs model; a clear :class:`InputError` naming the field otherwise."""
    if isinstance(inputs, spec.inputs):
        return inputs
    if isinstance(inputs, BaseModel):
        inputs = inputs.model_dump()
    try:
        return spec.inputs.model_validate(dict(inputs))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = f"not an input of {spec.name} (inputs: {', '.join(spec.inputs.model_fields)})"
        raise InputError(f"{spec.name}: {message}", field=field) from exc


def evaluate(
    name: str,
    inputs: BaseModel | Mapping[str, Any],
    config: EvalConfig | None = None,
    model: Mapping[str, str] | None = None,
) -> BenchmarkResult:
    """Score one benchmark unit and return its results object (no files are written).

    Args:
        name: the unit (``umd``, ``mir3d``, ``imis``, ``xray/cls``, ... or a plug-in's).
        inputs: the unit's inputs (its pydantic model, or a mapping such as ``{"ground_truth": ...}``).
        config: the evaluation configuration (default: :func:`load_config` with no file).
        model: ``{"name": ..., "version": ...}`` recorded in the results (optional).

    Raises:
        TypeError: an argument of the wrong type, naming it and what it accepts.
        trackeval.errors.TrackevalError: bad inputs or configuration, with the file, case and field.

    Example (the bundled real UMD example: chest CT organ labels of three subjects, CT and PET)::

        >>> import trackeval
        >>> from trackeval.demo.umd_example import example_dirs
        >>> gt, pred = example_dirs()
        >>> cfg = trackeval.load_config(None, ["engine.executor=local", "engine.cache=false"])
        >>> result = trackeval.evaluate("umd", {"ground_truth": gt, "predictions": pred}, cfg)
        >>> result.unit, result.data.n_cases
        ('umd', 6)
        >>> 0.0 < result.aggregates["umd/dsc"].value < 1.0
        True
    """
    check_argument("evaluate", "name", name, str, "a benchmark unit's name (str) such as 'umd' or 'xray/cls'")
    spec = unit(name)
    fields = ", ".join(f"{f!r}: ..." for f in spec.inputs.model_fields)
    check_argument(
        "evaluate", "inputs", inputs, (BaseModel, Mapping), f"{spec.name}'s inputs as a mapping ({{{fields}}})"
    )
    check_config("evaluate", config)
    check_argument("evaluate", "model", model, Mapping, "a mapping {'name': ..., 'version': ...}, or None", none=True)
    for key, value in (model or {}).items():
        check_argument("evaluate", f"model[{key!r}]", value, str, "a str")
    checked = validate_inputs(spec, inputs)
    cfg = config if config is not None else load_config()
    if not hasattr(cfg, spec.config_section):
        raise ConfigError(f"the configuration has no {spec.config_section!r} section (build it with load_config)")
    result = spec.evaluate(checked, cfg, dict(model or {}))
    if result.benchmark != spec.benchmark:
        raise ConfigError(f"unit {spec.name} returned results of benchmark {result.benchmark!r}")
    return result.model_copy(update={"task": spec.task, "plots": list(spec.plots)})


def unit_outputs(
    name: str, inputs: BaseModel | Mapping[str, Any], config: EvalConfig, result: BenchmarkResult
) -> dict[str, bytes]:
    """The unit's extra files for these inputs and result (:attr:`~trackeval.spec.BenchmarkSpec.outputs`, e.g.
    UMD's nnU-Net ``summary.json`` with ``--nnunet-summary``); ``{}`` when it declares none.

    Raises:
        ConfigError: a file name that is not a plain name, or is one of the results set's.
    """
    spec = unit(name)
    if spec.outputs is None:
        return {}
    extra = dict(hook(spec, "outputs")(validate_inputs(spec, inputs), config, result))
    for file_name in extra:
        if file_name in OUTPUT_FILES or Path(file_name).name != file_name or file_name in ("", ".", ".."):
            raise ConfigError(f"benchmark unit {spec.name!r}: extra output {file_name!r} is not a free plain file name")
    return extra


#: on the user's active run: the trackeval parent run of the evaluated version
EVALUATION_RUN_TAG = TAG + "evaluation_run"
#: on the trackeval parent run: the user's run that tracked it
SOURCE_RUN_TAG = TAG + "source_run"


def _config(config: EvalConfig | None) -> EvalConfig:
    return config if config is not None else load_config()


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _quiet_mlflow(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` (one that reaches MLflow) with MLflow's INFO lines (``Creating initial MLflow database
    tables...``, alembic's migrations) off the caller's terminal while it runs, as in the CLI; shown with
    ``TRACKEVAL_DEBUG=1`` (:func:`trackeval.errors.log_levels`). MLflow is imported first, so its loggers keep
    their own level for the caller's code afterwards."""

    @functools.wraps(function)
    def quiet(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        import mlflow  # noqa: F401 - configures its loggers before log_levels saves and sets them

        with log_levels(debug_from_env()):
            return function(*args, **kwargs)

    return quiet


def write_results(result: BenchmarkResult, folder: str | Path) -> dict[str, Path]:
    """Write ``result`` as a results folder (results.json, metrics.json, cases.parquet: what ``trackeval
    track`` and ``compare`` read), creating ``folder`` (a ``str`` or a ``Path``); returns ``{file name: path}``.

    >>> import trackeval
    >>> from trackeval.demo.umd_example import example_dirs
    >>> gt, pred = example_dirs()
    >>> cfg = trackeval.load_config(None, ["engine.executor=local", "engine.cache=false"])
    >>> result = trackeval.evaluate("umd", {"ground_truth": gt, "predictions": pred}, cfg)
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "v1"
    >>> files = trackeval.write_results(result, str(out))
    >>> sorted(p.name for p in files.values())
    ['cases.parquet', 'metrics.json', 'results.json']
    """
    check_argument("write_results", "result", result, BenchmarkResult, "the result trackeval.evaluate(...) returns")
    check_argument("write_results", "folder", folder, PATH_TYPES, PATH)
    return write_outputs(result, Path(folder))


RESULTS = "a result of trackeval.evaluate, a results folder (str or pathlib.Path), or a list of them"
#: a model version as the CLI takes it: a name, or a registry version number (``2``)
VERSION_TYPES = (str, int)


def _version(function: str, parameter: str, value: str | int | None, *, none: bool = False) -> str | None:
    """``value`` as the CLI would read it (``2`` -> ``"2"``), after the type check."""
    accepts = "a version name (str) or a registry version number (int)"
    check_argument(function, parameter, value, VERSION_TYPES, accepts + (", or None" if none else ""), none=none)
    return None if value is None else str(value)


def _model(function: str, model: str | None, *, none: bool = False) -> None:
    check_argument(
        function, "model", model, str, "a registered model name (str)" + (", or None" if none else ""), none=none
    )


def _folders(results: BenchmarkResult | str | Path | Sequence[str | Path], scratch: Path) -> list[Path]:
    """Results folders to track: each folder as given; a result object written into ``scratch`` first."""
    items = results if isinstance(results, (list, tuple)) else [results]
    for i, item in enumerate(items):
        where = f"results[{i}]" if items is results else "results"
        check_argument("track", where, item, (BenchmarkResult, *PATH_TYPES), RESULTS)
    out = []
    for i, item in enumerate(items):
        if isinstance(item, BenchmarkResult):
            folder = scratch / f"result_{i}"
            write_outputs(item, folder)
            out.append(folder)
        else:
            out.append(Path(item))
    return out


@_quiet_mlflow
def track(
    results: BenchmarkResult | str | Path | Sequence[str | Path],
    *,
    model: str | None = None,
    version: str | None = None,
    config: EvalConfig | None = None,
    replace: bool = False,
) -> list[Tracked]:
    """Log results (a result object, a results folder, or several folders) to MLflow as ``trackeval track``
    does: one evaluation run per unit under the version's parent run, the registered version and its
    ``challenger`` alias. ``model`` / ``version`` override the ones recorded in the results. Idempotent.
    Inside an active MLflow run, links the evaluation to it (module docstring).

    Messages name this function's parameters (``pass replace=True``), never the temporary folder a result
    object is written to for tracking (``results[0]`` instead).

    Raises:
        InputError: a folder does not verify, or the model or version is missing or refused (other results
            already tracked for the version: ``replace=True`` re-points it).
        TrackingError: MLflow failed (the results stay on disk; calling again completes the work).
    """
    import mlflow

    from trackeval.tracking.client import Mlflow
    from trackeval.tracking.track import track_results

    _model("track", model, none=True)
    version = _version("track", "version", version, none=True)
    check_config("track", config)
    check_argument("track", "replace", replace, bool, "True or False")
    cfg = _config(config)
    active = mlflow.active_run()
    named = {k: v for k, v in (("name", model), ("version", version)) if v}
    with tempfile.TemporaryDirectory(prefix="trackeval-results-") as scratch:
        folders = _folders(results, Path(scratch))
        try:
            outcomes = track_results(folders, cfg.tracking, named or None, replace=replace)
        except InputError as exc:
            _hide_scratch(exc, Path(scratch), isinstance(results, (list, tuple)))
            raise
        if active is not None:
            _link_active(Mlflow(cfg.tracking), active.info.run_id, outcomes, folders)
    return outcomes


def _hide_scratch(exc: InputError, scratch: Path, listed: bool) -> None:
    """Take the temporary folder a result object was written to (``scratch/result_<i>``, gone after the call) out
    of ``exc``: no ``file=`` inside it, and the result's argument (``results``, or ``results[i]`` when ``listed``)
    wherever the message names a path inside it."""
    if exc.file and Path(exc.file).is_relative_to(scratch):
        exc.file = None
    pattern = re.escape(str(scratch)) + r"[/\\]result_(\d+)[^\s,;\]]*"
    exc.message = re.sub(pattern, lambda m: f"results[{m[1]}]" if listed else "results", exc.message)
    exc.args = (str(exc),)


def _link_active(ml: Mlflow, active_id: str, outcomes: list[Tracked], folders: list[Path]) -> None:
    """Tag the active run and the trackeval parent runs with each other; log the headline metrics (with CIs)
    of every tracked result into the active run."""
    from mlflow.entities import Metric

    from trackeval.io.results_folder import read_results

    now = int(time.time() * 1000)
    metrics: dict[str, float] = {}
    for outcome, folder in zip(outcomes, folders, strict=True):
        parent = ml.call("get_run", ml.client.get_run, outcome.run_id).data.tags.get("mlflow.parentRunId", "")
        if parent:
            ml.call("set_tag", ml.client.set_tag, parent, SOURCE_RUN_TAG, active_id)
            ml.call("set_tag", ml.client.set_tag, active_id, EVALUATION_RUN_TAG, parent)
        metrics.update(headline_metrics(read_results(folder)))
    batch = [Metric(k, v, now, 0) for k, v in sorted(metrics.items())]
    for start in range(0, len(batch), 1000):  # MLflow's log_batch limit
        ml.call("log_batch", ml.client.log_batch, active_id, metrics=batch[start : start + 1000])


@_quiet_mlflow
def compare(a: str | Path, b: str | Path, *, config: EvalConfig | None = None) -> list[BenchmarkComparison]:
    """Paired comparisons ``a - b`` of every unit both were evaluated on, each on its gate's primary metric
    (``trackeval compare``): ``a`` / ``b`` are ``NAME@ALIAS``, ``NAME/VERSION``, a run id or a results folder.

    Raises:
        InputError: a reference resolves to nothing, or the two share no unit.
    """
    from trackeval.tracking.gatekeeper import Gate

    for name, ref in (("a", a), ("b", b)):
        check_argument("compare", name, ref, PATH_TYPES, "'NAME@ALIAS', 'NAME/VERSION', a run id or a results folder")
    check_config("compare", config)
    cfg = _config(config)
    comparisons, _ = Gate.from_config(cfg).compare(str(a), str(b))
    return comparisons


@_quiet_mlflow
def promote(
    model: str, candidate: str | int, *, dry_run: bool = False, config: EvalConfig | None = None
) -> Decision | None:
    """Gate ``candidate`` (a version name such as ``v2``, a registry version number such as ``2`` as the CLI's
    ``--candidate 2``, or ``@challenger``) against ``model@champion`` as
    ``trackeval promote`` does: on pass the aliases move (``@previous`` <- old champion, ``@champion`` <-
    candidate); pass or fail, the decision is recorded. ``dry_run``: the decision that would be taken, nothing
    recorded or moved (None when the candidate is already the champion and has no ``@previous``).

    Idempotent, as :func:`track` is (a notebook run again): when ``candidate`` is already ``@champion`` and the
    decision that made it so still holds (as :func:`verify` checks it: its record agrees with itself, signed by
    one of ``gate.trusted_keys`` when any is configured, and the evidence of both sides is unchanged), that
    recorded decision is returned and nothing is recorded or moved. (The CLI's ``trackeval promote`` still
    refuses it, exit 2.)

    Raises:
        TypeError: an argument of the wrong type, naming it and what it accepts.
        InputError: no such model or version, or the candidate is the champion without a decision that still
            holds (moved outside the gate; not with ``dry_run``).
    """
    from trackeval.attest.keys import load_trusted
    from trackeval.tracking.gatekeeper import Gate

    _model("promote", model)
    candidate = _version("promote", "candidate", candidate)
    check_argument("promote", "dry_run", dry_run, bool, "True or False")
    check_config("promote", config)
    cfg = _config(config)
    gate = Gate.from_config(cfg)
    if not dry_run:
        standing = gate.standing(model, candidate, load_trusted(list(cfg.gate.trusted_keys)))
        if standing is not None:
            return standing.decision
    return gate.promote(model, candidate, dry_run=dry_run).decision


@_quiet_mlflow
def verify(
    model: str, *, config: EvalConfig | None = None, trusted_keys: Sequence[str | Path] = ()
) -> list[AliasStatus]:
    """``trackeval verify``: each alias of ``model`` with the version it names and its problem (None: it holds:
    ``@champion`` rests on a recorded passing decision over the evidence the version still points at, signed by
    one of the trusted keys when any is configured). ``trusted_keys``: public key files (``gate.pub``), added to
    the config's ``gate.trusted_keys``; with none, signatures are not checked and each status says unsigned.

    Raises:
        TypeError: ``model`` is not a str, ``config`` not a configuration.
        InputError: no such model, or a trusted key file that cannot be read.
    """
    from trackeval.attest.keys import load_trusted
    from trackeval.tracking.gatekeeper import Gate

    _model("verify", model)
    check_config("verify", config)
    cfg = _config(config)
    trusted = load_trusted([*cfg.gate.trusted_keys, *(str(k) for k in trusted_keys)])
    return Gate.from_config(cfg).verify(model, trusted)
