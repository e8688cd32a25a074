"""Interaction logs (JSONL): written by the reference runner or any external one, verified before scoring.

One line per answered turn::

    {"case_id": "ct_s05", "target": "liver", "prompt_type": "point", "turn": 2, "seed": 42,
     "prompt": {"clicks": [{"coords": [101, 77], "label": 0}], "box": null, "text": null},
     "mask_path": "masks/ct_s05/liver/point_02.png"}

``prompt`` is what the model received at that turn (:meth:`Prompts.to_json`); ``mask_path`` (relative to the
log's folder) holds the model's binarised answer: a 2D PNG (non-zero = foreground) or a ``.npy``/``.npz``
(key ``mask``) array, bool/integer (non-zero) or float logits (``> 0``). Every line of a log shares one
``seed``. Verification re-derives each turn's prompt from the truth, the previous turn's mask and the logged
seed (:class:`~trackeval.benchmarks.imis.session.PromptSchedule`) and rejects the log at the first turn whose prompt
differs, naming the case, target and turn.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.protocol import PROMPT_TYPES, ModelError, to_mask
from trackeval.benchmarks.imis.session import PromptSchedule, Turn
from trackeval.errors import InputError
from trackeval.io.files import decode_text, read_bytes
from trackeval.io.hashing import sha256_bytes, sha256_stream
from trackeval.io.paths import resolve_inside
from trackeval.io.structured import parse_jsonl


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClickJSON(_Strict):
    coords: list[int]
    label: Literal[0, 1]


class BoxJSON(_Strict):
    lo: list[int]
    hi: list[int]


class PromptJSON(_Strict):
    clicks: list[ClickJSON]
    box: BoxJSON | None
    text: str | None


class LogLine(_Strict):
    """One validated log line (the log's boundary model)."""

    case_id: str
    target: str
    prompt_type: Literal["point", "box", "text"]
    turn: int = Field(ge=1)
    seed: int
    prompt: PromptJSON
    mask_path: str


@dataclass(frozen=True)
class InteractionLog:
    """A parsed log: lines grouped by case (``(line number, line)``), the prompt types run and the seed."""

    path: Path
    by_case: dict[str, list[tuple[int, LogLine]]]
    prompt_types: tuple[str, ...]
    seed: int
    digest: str


def read_log(path: Path) -> InteractionLog:
    """Parse and validate a JSONL log; :class:`InputError` names the file, line and field of any problem."""
    raw = read_bytes(path)
    by_case: dict[str, list[tuple[int, LogLine]]] = {}
    seeds: set[int] = set()
    types: set[str] = set()
    for n, obj in parse_jsonl(decode_text(raw, file=path), file=path):
        try:
            line = LogLine.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise InputError(f"line {n}: {err['msg']}", file=str(path), field=loc or f"line {n}") from exc
        by_case.setdefault(line.case_id, []).append((n, line))
        seeds.add(line.seed)
        types.add(line.prompt_type)
    if not by_case:
        raise InputError("the interaction log has no lines", file=str(path))
    if len(seeds) > 1:
        raise InputError(f"lines use different seeds {sorted(seeds)}; one log = one seed", file=str(path), field="seed")
    ordered = tuple(p for p in PROMPT_TYPES if p in types)
    return InteractionLog(path, by_case, ordered, seeds.pop(), sha256_bytes(raw))


def read_mask(path: Path, shape: tuple[int, ...], *, case_id: str) -> np.ndarray:
    """A logged mask as bool of ``shape`` (PNG non-zero; .npy/.npz masks non-zero, float logits > 0)."""
    where = {"file": str(path), "case_id": case_id}
    try:
        raw = path.read_bytes()
        if path.suffix == ".png":
            with Image.open(io.BytesIO(raw)) as img:
                arr = np.asarray(img.convert("L")) != 0
        elif path.suffix in (".npy", ".npz"):
            loaded = np.load(io.BytesIO(raw), allow_pickle=False)
            arr = loaded["mask"] if path.suffix == ".npz" else loaded
        else:
            raise InputError("mask files must be .png, .npy or .npz", field="mask_path", **where)
    except FileNotFoundError as exc:
        raise InputError("mask file not found", field="mask_path", **where) from exc
    except (OSError, UnidentifiedImageError, ValueError, KeyError) as exc:
        raise InputError(f"unreadable mask file: {type(exc).__name__}: {exc}", field="mask_path", **where) from exc
    try:
        return to_mask(arr, shape, where=str(path))
    except ModelError as exc:
        raise InputError(str(exc), field="mask_path", **where) from exc


def write_mask(path: Path, mask: np.ndarray) -> str:
    """Write a bool mask (2D: 8-bit PNG 0/255; otherwise compressed ``.npz``); returns the file name used."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if mask.ndim == 2:
        path = path.with_suffix(".png")
        Image.fromarray(mask.astype(np.uint8) * 255, mode="L").save(path, optimize=True)
    else:
        path = path.with_suffix(".npz")
        np.savez_compressed(path, mask=mask.astype(bool))
    return path.name


def log_lines(
    case_id: str, sequences: dict[str, dict[str, list[Turn]]], seed: int, mask_dir: Path, rel_to: Path
) -> Iterable[str]:
    """Write the masks of one case's sequences under ``mask_dir`` and yield its JSONL lines."""
    for target, by_prompt in sequences.items():
        for prompt_type, turns in by_prompt.items():
            for t in turns:
                name = write_mask(mask_dir / case_id / target / f"{prompt_type}_{t.turn:02d}", t.mask)
                line = {
                    "case_id": case_id,
                    "target": target,
                    "prompt_type": prompt_type,
                    "turn": t.turn,
                    "seed": seed,
                    "prompt": t.prompts.to_json(),
                    "mask_path": (mask_dir / case_id / target / name).relative_to(rel_to).as_posix(),
                }
                yield json.dumps(line, sort_keys=True)


def _describe(prompt: dict) -> str:
    parts = [f"click {tuple(c['coords'])} label {c['label']}" for c in prompt["clicks"]] or ["no click"]
    if prompt["box"] is not None:
        parts.append(f"box {tuple(prompt['box']['lo'])}-{tuple(prompt['box']['hi'])}")
    if prompt["text"] is not None:
        parts.append(f"text {prompt['text']!r}")
    return ", ".join(parts)


def verify_case(
    log: InteractionLog,
    case_id: str,
    truths: dict[str, np.ndarray],
    cfg: IMISConfig,
    prompt_types: tuple[str, ...],
) -> tuple[dict[str, dict[str, list[np.ndarray]]], str]:
    """Check one case's logged sequences against the protocol; ``{target: {prompt: masks}}`` and a digest.

    Raises :class:`InputError` (file = the log, case = ``case_id``, the target and turn in the message) when a
    sequence is missing or incomplete, a target is not in the ground truth, or a logged prompt is not the one
    the protocol derives from the truth and the previous logged mask. Lines of other prompt types are ignored.
    """
    seqs = _sequences(log, case_id, truths, prompt_types)
    out: dict[str, dict[str, list[np.ndarray]]] = {}
    for target in sorted(truths):
        out[target] = {}
        for prompt_type in prompt_types:
            turns = seqs.get((target, prompt_type), {})
            out[target][prompt_type] = _verify_sequence(log, case_id, target, prompt_type, truths[target], turns, cfg)
    return out, masks_digest(out)


def _sequences(
    log: InteractionLog, case_id: str, truths: dict[str, np.ndarray], prompt_types: tuple[str, ...]
) -> dict[tuple[str, str], dict[int, tuple[int, LogLine]]]:
    """One case's lines of ``prompt_types`` as ``{(target, prompt type): {turn: (line number, line)}}``.

    Raises:
        InputError: a line's target is not in ``truths``, or a turn is logged twice.
    """
    lines = [(n, line) for n, line in log.by_case.get(case_id, []) if line.prompt_type in prompt_types]
    seqs: dict[tuple[str, str], dict[int, tuple[int, LogLine]]] = {}
    for n, line in lines:
        if line.target not in truths:
            raise InputError(
                f"line {n}: target {line.target!r} is not a non-empty target of this image",
                file=str(log.path),
                case_id=case_id,
                field="target",
            )
        turns = seqs.setdefault((line.target, line.prompt_type), {})
        if line.turn in turns:
            raise InputError(
                f"line {n}: target {line.target}, prompt {line.prompt_type}, turn {line.turn} is logged twice",
                file=str(log.path),
                case_id=case_id,
                field="turn",
            )
        turns[line.turn] = (n, line)
    return seqs


def _verify_sequence(
    log: InteractionLog,
    case_id: str,
    target: str,
    prompt_type: str,
    truth: np.ndarray,
    turns: dict[int, tuple[int, LogLine]],
    cfg: IMISConfig,
) -> list[np.ndarray]:
    """The masks of one logged sequence (turns 1..``cfg.max_turns``, bool of ``truth``'s shape), each turn's
    prompt checked against the one the protocol derives from ``truth`` and the previous turn's mask.

    Raises:
        InputError: a turn missing or beyond ``imis.max_turns``, a prompt that differs, or a bad mask file.
    """
    expected = set(range(1, cfg.max_turns + 1))
    if set(turns) != expected:
        missing = sorted(expected - set(turns)) or sorted(set(turns) - expected)
        raise InputError(
            f"target {target}, prompt {prompt_type}: turn {missing[0]} missing or beyond imis.max_turns="
            f"{cfg.max_turns} (each sequence needs turns 1..{cfg.max_turns})",
            file=str(log.path),
            case_id=case_id,
            field="turn",
        )
    schedule = PromptSchedule(truth, case_id, target, prompt_type, cfg, log.seed)
    mask: np.ndarray | None = None
    masks = []
    for t in range(1, cfg.max_turns + 1):
        n, line = turns[t]
        derived = schedule.prompts(t, mask).to_json()
        logged = line.prompt.model_dump()
        if logged != derived:
            raise InputError(
                f"line {n}: target {target}, prompt {prompt_type}, turn {t}: the logged prompt "
                f"({_describe(logged)}) does not follow the protocol ({_describe(derived)})",
                file=str(log.path),
                case_id=case_id,
                field="prompt",
            )
        mask_file = resolve_inside(log.path.parent, line.mask_path, case_id=case_id)
        mask = read_mask(mask_file, truth.shape, case_id=case_id)
        masks.append(mask)
    return masks


def masks_digest(masks: dict[str, dict[str, list[np.ndarray]]]) -> str:
    """sha256 over every turn mask of a case (bit-packed, in target / prompt / turn order)."""
    return sha256_stream(
        np.packbits(m).tobytes() for per_target in masks.values() for seq in per_target.values() for m in seq
    )
