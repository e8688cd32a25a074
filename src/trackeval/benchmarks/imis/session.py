"""The interaction loop: prompts derived turn by turn from truth + the previous mask, the model called, scored.

:class:`PromptSchedule` is the single source of the protocol's prompts: the live loop (:func:`run_sequence`)
and the offline log verifier (:mod:`trackeval.benchmarks.imis.logs`) both ask it for turn ``t``'s prompt given the
mask of turn ``t - 1``, so a log is accepted exactly when its clicks are the ones the live loop would send.
Scoring the turns' masks is the IMIS adapter's (:func:`trackeval.benchmarks.imis.scoring.sequence_metrics`): the metric
keys belong to it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from trackeval.benchmarks.imis.clicks import bounding_box, error_click, first_click
from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.grid import score_kind, to_label_grid
from trackeval.benchmarks.imis.protocol import (
    PROMPT_TYPES,
    Click,
    InteractiveModel,
    ModelError,
    Prompts,
    Request,
    model_array,
    score_type,
    text_prompt,
    to_mask,
)
from trackeval.errors import InputError


def turn_rng(seed: int, case_id: str, target: str, prompt_type: str, turn: int) -> np.random.Generator:
    """The generator of one turn: ``default_rng([seed, crc32(case_id), crc32(target), prompt index, turn])``."""
    entropy = [seed, zlib.crc32(case_id.encode()), zlib.crc32(target.encode()), PROMPT_TYPES.index(prompt_type), turn]
    return np.random.default_rng(entropy)


class PromptSchedule:
    """The prompts of one sequence (case x target x initial prompt type), derived turn by turn.

    Args:
        truth: the target mask (bool, non-empty).
        case_id, target: identify the sequence (they seed its generators).
        prompt_type: ``point``, ``box`` or ``text`` (turn 1); later turns are clicks.
        cfg: the protocol switches.
        seed: the base seed (``cfg.seed`` live; the logged seed when verifying a log).
    """

    def __init__(
        self, truth: np.ndarray, case_id: str, target: str, prompt_type: str, cfg: IMISConfig, seed: int
    ) -> None:
        self.truth, self.case_id, self.target, self.prompt_type = truth, case_id, target, prompt_type
        self.cfg, self.seed = cfg, seed
        self._clicks: list[Click] = []
        self._initial = Prompts()

    def prompts(self, turn: int, previous_mask: np.ndarray | None) -> Prompts:
        """Turn ``turn``'s prompts; ``previous_mask`` is the binarised output of turn ``turn - 1`` (None at 1).

        Must be called for turns 1, 2, ... in order (accumulation remembers earlier clicks).
        """
        rng = turn_rng(self.seed, self.case_id, self.target, self.prompt_type, turn)
        if turn == 1:
            if self.prompt_type == "point":
                click = first_click(self.truth, rng, self.cfg.first_click_fraction)
                self._clicks = [click]
                self._initial = Prompts(clicks=(click,))
            elif self.prompt_type == "box":
                self._initial = Prompts(box=bounding_box(self.truth, rng, self.cfg.box_jitter_px))
            else:
                self._initial = Prompts(text=text_prompt(self.target))
            return self._initial
        if previous_mask is None:
            raise ValueError("turns after the first need the previous mask")
        clicked = [c.coords for c in self._clicks]
        click = error_click(previous_mask, self.truth, rng, self.cfg.click_mode, clicked)
        noop: tuple[Click, ...] = ()
        if click is not None:
            self._clicks.append(click)
        elif self.cfg.protocol == "imis_bench":
            noop = (noop_click(rng),)
        if self.cfg.accumulate_prompts:
            return Prompts(clicks=(*self._clicks, *noop), box=self._initial.box, text=self._initial.text)
        return Prompts(clicks=noop if click is None else (click,))


#: IMIS-Bench draws the coordinates of its "not a point" click from ``[0, NOOP_RANGE)`` on each axis
NOOP_RANGE = 256


def noop_click(rng: np.random.Generator) -> Click:
    """``imis.protocol: imis_bench``: the click IMIS-Bench sends when the previous mask has no error.

    Label ``-1`` (SAM's prompt encoder treats it as "not a point"), at a pixel drawn from ``rng`` (the turn's
    generator, after the error-click rule found no error) uniformly in ``[0, 256)`` on each axis, as the original.
    The original draws it from its global generator (seeded once with 42), so the label and the range are
    reproduced exactly, the pixel only in distribution (a model that ignores ``-1`` clicks is unaffected).
    """
    return Click(tuple(int(v) for v in rng.integers(0, NOOP_RANGE, size=2)), -1)


@dataclass(frozen=True)
class Turn:
    """One answered turn: the prompts sent and the binarised model output (on the grid the model sees; the next
    click is derived from it). ``label_mask``: with ``imis.protocol: imis_bench`` and a label grid given to
    :func:`run_sequence`, the answer brought back to the label grid, IMIS-Bench's way (what Dice is taken on);
    None otherwise."""

    turn: int
    prompts: Prompts
    mask: np.ndarray
    label_mask: np.ndarray | None = None


def run_sequence(
    model: InteractiveModel,
    image: np.ndarray,
    truth: np.ndarray,
    case_id: str,
    target: str,
    prompt_type: str,
    cfg: IMISConfig,
    label_shape: tuple[int, int] | None = None,
) -> list[Turn]:
    """Drive ``model`` through ``cfg.max_clicks`` turns of one sequence.

    ``label_shape`` (``imis.protocol: imis_bench``): the label grid; each turn's answer is then also brought back
    there (:attr:`Turn.label_mask`, :func:`trackeval.benchmarks.imis.grid.to_label_grid`). Every call goes through
    :func:`call_model` (``cfg.model_timeout_s``). Raises :class:`ModelError` naming the case, target, prompt and
    turn when the model raises, hangs or answers with a wrong output (or declares a wrong ``score_type``).
    """
    scores = score_type(model)
    back = label_shape is not None and cfg.protocol == "imis_bench"
    schedule = PromptSchedule(truth, case_id, target, prompt_type, cfg, cfg.seed)
    previous_raw: np.ndarray | None = None
    mask: np.ndarray | None = None
    turns = []
    for t in range(1, cfg.max_clicks + 1):
        prompts = schedule.prompts(t, mask)
        request = Request(image, prompts, previous_raw, target, t, truth.shape)
        where = f"case {case_id}, target {target}, prompt {prompt_type}, turn {t}"
        raw = call_model(model, request, cfg.model_timeout_s, where=where, case_id=case_id)
        try:
            mask = to_mask(raw, truth.shape, where=where, scores=scores)
        except ModelError as exc:
            raise ModelError(exc.message, case_id=case_id, field="--model") from exc
        label_mask = None
        if back:
            answer = model_array(raw, truth.shape, where=where, scores=scores)
            label_mask = to_label_grid(answer, label_shape, score_kind(answer, scores))
        previous_raw = raw
        turns.append(Turn(t, prompts, mask, label_mask))
    return turns


#: longest wait of the main thread (s) before it handles a pending signal while a model call runs
SIGNAL_SLICE_S = 0.1


def call_model(model: InteractiveModel, request: Request, timeout_s: float, *, where: str, case_id: str) -> object:
    """``model.predict(request)``, waiting at most ``timeout_s`` seconds for the answer.

    The call runs on a daemon worker thread and the caller waits for it with a timeout. Python cannot stop a
    thread: a call that times out is abandoned (its thread keeps running in the background until the model
    returns) and, being a daemon, never keeps the process from exiting. A real Ctrl-C reaches the waiting
    (main) thread as ``KeyboardInterrupt`` as usual.

    Raises:
        ModelError: naming ``where`` and ``case_id``, when the model does not answer within ``timeout_s``, or
            raises anything, ``SystemExit``, ``KeyboardInterrupt`` and ``GeneratorExit`` included (a model
            cannot end the run, least of all with a success status).
    """
    answer: list[object] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            answer.append(model.predict(request))
        except BaseException as exc:  # every escape of the model is its error, SystemExit included
            failure.append(exc)

    worker = threading.Thread(target=work, name=f"trackeval-model ({where})", daemon=True)
    worker.start()
    deadline = time.monotonic() + timeout_s
    while worker.is_alive() and (remaining := deadline - time.monotonic()) > 0:
        # joined in slices: a signal delivered to the model's thread (SIGINT raised there, or a Ctrl-C the kernel
        # routes to it) is handled by the main thread only between slices, so Ctrl-C stops the run within
        # SIGNAL_SLICE_S, not after the whole timeout; a model that answers ends the join at once
        worker.join(min(remaining, SIGNAL_SLICE_S))
    if failure:
        exc = failure[0]
        raise ModelError(
            f"model failed on {where}: {type(exc).__name__}: {exc}", case_id=case_id, field="--model"
        ) from exc
    if not answer:
        raise ModelError(
            f"model did not answer within imis.model_timeout_s={timeout_s:g} s on {where} (the call is abandoned)",
            case_id=case_id,
            field="--model",
        )
    return answer[0]


def parse_model_args(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{k: v}`` (factory keyword arguments); InputError on a malformed item."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise InputError(f"--model-arg expects NAME=VALUE, got {item!r}", field="--model-arg")
        out[key] = value
    return out


@functools.cache
def load_model(spec: str, kwargs: tuple[tuple[str, str], ...] = ()) -> InteractiveModel:
    """Build the model named by ``spec`` once per process.

    ``spec`` is ``MODULE:FACTORY`` (``FACTORY(**kwargs)`` returns the model; string keyword arguments) or an
    MLflow model URI (``models:/name/1``, ``runs:/id/path``, or a local model folder prefixed ``mlflow:``)
    loaded with ``mlflow.pyfunc.load_model(uri).unwrap_python_model()`` (the tracking URI from
    ``MLFLOW_TRACKING_URI`` or ``mlflow.set_tracking_uri``).

    Raises :class:`InputError` (field ``--model``) when the model cannot be built or loaded (a factory that
    raises ``SystemExit`` included; a ``KeyboardInterrupt`` is taken for Ctrl-C and ends the run), or when the object
    does not implement the protocol: a callable ``predict`` that accepts one positional argument, the request
    (an MLflow ``PythonModel`` with only ``predict(context, model_input)`` does not).
    """
    if spec.startswith(("models:/", "runs:/", "mlflow:")):
        import mlflow.pyfunc

        try:
            model = mlflow.pyfunc.load_model(spec.removeprefix("mlflow:")).unwrap_python_model()
        except (Exception, SystemExit, GeneratorExit) as exc:
            raise InputError(
                f"cannot load MLflow model {spec!r}: {type(exc).__name__}: {exc}", field="--model"
            ) from exc
    else:
        module_name, sep, factory_name = spec.partition(":")
        if not sep or not module_name or not factory_name:
            raise InputError(f"--model expects MODULE:FACTORY or an MLflow model URI, got {spec!r}", field="--model")
        try:
            factory = getattr(importlib.import_module(module_name), factory_name)
            model = factory(**dict(kwargs))
        except (Exception, SystemExit, GeneratorExit) as exc:
            raise InputError(f"cannot build model {spec!r}: {type(exc).__name__}: {exc}", field="--model") from exc
    if not _takes_one_request(model):
        raise InputError(
            f"model {spec!r} ({type(model).__name__}) does not implement predict(request) "
            "(see trackeval.benchmarks.imis.protocol)",
            field="--model",
        )
    return model


def _takes_one_request(model: object) -> bool:
    """Whether ``model.predict`` is callable with exactly one positional argument."""
    predict = getattr(model, "predict", None)
    if not callable(predict):
        return False
    try:
        inspect.signature(predict).bind(None)
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): trust the attribute
        return True
    return True


def interact_case(
    model: InteractiveModel,
    case_id: str,
    image: np.ndarray,
    masks: Mapping[str, np.ndarray],
    prompt_types: tuple[str, ...],
    cfg: IMISConfig,
    label_shape: tuple[int, int] | None = None,
) -> dict[str, dict[str, list[Turn]]]:
    """Every sequence of one image: ``{target: {prompt type: turns}}`` (targets in sorted order); ``label_shape``
    as :func:`run_sequence`."""
    return {
        target: {
            p: run_sequence(model, image, masks[target], case_id, target, p, cfg, label_shape) for p in prompt_types
        }
        for target in sorted(masks)
    }
