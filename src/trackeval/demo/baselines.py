"""Two interactive baselines that implement the IMIS protocol with real model outputs (demo models: the
pipeline trains and runs them; torch and MONAI are imported with this module, never by the evaluation).

* :class:`RegionGrower` (factory ``trackeval.demo.baselines:region_grower``): classical, 2D or 3D. A
  click grows the connected region of pixels whose grey value lies within ``tolerance`` robust standard
  deviations (1.4826 MAD, at least ``min_sigma``) of the median of the click's neighbourhood (after a
  one-pixel opening, holes filled). The first click (empty previous mask) grows freely; a box grows from its
  centre inside the box. Every later click edits the previous mask it receives (the original protocol sends
  only the new click and the previous mask): a positive click adds its grown region, a negative click removes
  the region grown inside the mask, both restricted to a disk around the click whose radius scales with the
  click's depth in its error region (``depth_factor`` x the distance from the click to the other side of the
  mask boundary, clipped to ``[min_radius, radius]`` px). A click 1 px outside the mask thus fixes a thin
  boundary band, a click deep inside a leak removes a large part of it; this keeps corrections local and
  makes Dice rise with the clicks in expectation (see the baselines table in ``docs/benchmarks/imis.md``).
* :class:`ClickUNet` (factory ``trackeval.demo.baselines:click_unet``, argument ``weights``): a small
  MONAI ``BasicUNet`` (2D) on five channels: grey image, positive-click disks, negative-click disks, box mask,
  previous mask probability; returns logits. :func:`train_click_unet` trains it on the ``training`` list of an
  IMIS-layout folder on CPU on states made by the protocol's simulator (first clicks, boxes, and corrective
  clicks from :func:`~trackeval.benchmarks.imis.clicks.error_click` on the region grower's and the network's own
  earlier outputs or a perturbed truth), and saves the ``state_dict`` with ``torch.save``; it is loaded with
  ``torch.load(..., weights_only=True)``.

Neither supports text prompts (``supported_prompts``), so the text row stays empty for them.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from monai.networks.nets import BasicUNet
from scipy import ndimage

from trackeval.benchmarks.imis.cases import load_cases, read_case
from trackeval.benchmarks.imis.clicks import bounding_box, error_click, first_click
from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.protocol import Box, Click, Prompts, Request
from trackeval.benchmarks.imis.session import run_sequence


def grey(image: np.ndarray) -> np.ndarray:
    """An RGB ``(H, W, 3)`` image as float grey (channel mean); other arrays as float unchanged."""
    arr = np.asarray(image, dtype=np.float32)
    return arr.mean(axis=-1) if arr.ndim == 3 and arr.shape[-1] == 3 else arr


def _box_mask(box: Box, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=bool)
    out[tuple(slice(lo, hi + 1) for lo, hi in zip(box.lo, box.hi, strict=True))] = True
    return out


class RegionGrower:
    """Click-seeded region growing (see the module docstring). Parameters in grey levels and pixels.

    Args:
        tolerance: region = grey values within ``tolerance`` robust standard deviations of the seed median.
        min_sigma: floor of the robust standard deviation (grey levels; flat patches would grow nothing).
        window: half side (px) of the seed neighbourhood the median and MAD come from.
        radius: largest correction radius (px).
        depth_factor: correction radius = ``depth_factor`` x the click's distance (px) to the mask boundary.
        min_radius: smallest correction radius (px).
    """

    supported_prompts = ("point", "box")

    def __init__(
        self,
        tolerance: float = 2.0,
        min_sigma: float = 6.0,
        window: int = 2,
        radius: int = 24,
        depth_factor: float = 2.0,
        min_radius: float = 2.0,
    ):
        self.tolerance, self.min_sigma, self.window, self.radius = tolerance, min_sigma, window, radius
        self.depth_factor, self.min_radius = depth_factor, min_radius

    def _grow(self, img: np.ndarray, seed: tuple[int, ...], within: np.ndarray | None = None) -> np.ndarray:
        patch = img[tuple(slice(max(c - self.window, 0), c + self.window + 1) for c in seed)]
        centre = float(np.median(patch))
        sigma = max(1.4826 * float(np.median(np.abs(patch - centre))), self.min_sigma)
        candidate = np.abs(img - centre) <= self.tolerance * sigma
        if within is not None:
            candidate &= within
        opened = ndimage.binary_opening(candidate)
        if opened[seed]:
            candidate = opened
        components, _ = ndimage.label(candidate)
        region = np.zeros(img.shape, dtype=bool)
        region[seed] = True
        if components[seed] != 0:
            region = ndimage.binary_fill_holes(components == components[seed])
        return region

    def _correction_disk(self, mask: np.ndarray, click: Click) -> np.ndarray:
        """The disk (ball in 3D) a correction click may change: radius from the click's depth in its error side.

        The depth is the Euclidean distance (px) from the click to the nearest pixel on the other side of the
        mask boundary (outside pixels for a negative click, mask pixels for a positive one); ``radius`` when
        that side is empty.
        """
        inside = mask if click.label == 0 else ~mask
        depth = float(ndimage.distance_transform_edt(inside)[click.coords]) if not inside.all() else self.radius
        r = min(max(self.depth_factor * depth, self.min_radius), self.radius)
        grid = np.indices(mask.shape)
        return sum((g - c) ** 2 for g, c in zip(grid, click.coords, strict=True)) <= r**2

    def predict(self, request: Request) -> np.ndarray:
        img = grey(request.image)
        p: Prompts = request.prompts
        if request.previous is not None:
            mask = np.asarray(request.previous, dtype=bool).copy()  # its own earlier output: a bool mask
        elif p.box is not None:
            centre = tuple((lo + hi) // 2 for lo, hi in zip(p.box.lo, p.box.hi, strict=True))
            mask = self._grow(img, centre, within=_box_mask(p.box, img.shape))
        else:
            mask = np.zeros(img.shape, dtype=bool)
        for click in p.clicks:
            if not mask.any():
                if click.label == 1:  # a first click grows freely; a negative click on nothing changes nothing
                    mask |= self._grow(img, click.coords)
                continue
            disk = self._correction_disk(mask, click)
            if click.label == 1:
                mask |= self._grow(img, click.coords, within=disk)
            else:
                mask &= ~(self._grow(img, click.coords, within=mask) & disk)
        return mask


def region_grower(**kwargs: str) -> RegionGrower:
    """Factory for ``--model trackeval.demo.baselines:region_grower`` (``--model-arg tolerance=2.5``)."""
    floats = ("tolerance", "min_sigma", "depth_factor", "min_radius")
    return RegionGrower(**{k: float(v) if k in floats else int(v) for k, v in kwargs.items()})


#: radius (px) of the click disks in the network input.
CLICK_RADIUS = 3
FEATURES = (8, 8, 16, 32, 64, 8)
#: side (px) of the training crops, centred near the target (inference runs on the whole image).
CROP = 96


def encode(img01: np.ndarray, prompts: Prompts, previous: np.ndarray | None) -> np.ndarray:
    """The 5-channel ``(5, H, W)`` float32 input: grey in [0, 1], positive/negative disks, box, previous prob."""
    h, w = img01.shape
    yy, xx = np.indices((h, w))
    out = np.zeros((5, h, w), dtype=np.float32)
    out[0] = img01
    for c in prompts.clicks:
        out[1 if c.label == 1 else 2][(yy - c.coords[0]) ** 2 + (xx - c.coords[1]) ** 2 <= CLICK_RADIUS**2] = 1.0
    if prompts.box is not None:
        out[3] = _box_mask(prompts.box, (h, w))
    if previous is not None:
        prev = np.asarray(previous)
        out[4] = 1.0 / (1.0 + np.exp(-prev)) if np.issubdtype(prev.dtype, np.floating) else prev != 0
    return out


def build_network() -> BasicUNet:
    """The small 2D BasicUNet (5 input channels, 1 logit channel, about 0.1 M parameters)."""
    return BasicUNet(spatial_dims=2, in_channels=5, out_channels=1, features=FEATURES)


class ClickUNet:
    """Protocol wrapper of the network: one forward pass per turn, logits at the image's resolution."""

    supported_prompts = ("point", "box")

    def __init__(self, network: BasicUNet):
        self.network = network.eval()

    def predict(self, request: Request) -> np.ndarray:
        img = grey(request.image)
        if img.ndim != 2:
            raise ValueError("ClickUNet is a 2D model")
        x = torch.from_numpy(encode(img / 255.0, request.prompts, request.previous))[None]
        with torch.no_grad():
            return self.network(_pad16(x))[0, 0, : img.shape[0], : img.shape[1]].numpy()


def _pad16(x: torch.Tensor) -> torch.Tensor:
    h, w = x.shape[-2:]
    return torch.nn.functional.pad(x, (0, -w % 16, 0, -h % 16))


def click_unet(weights: str) -> ClickUNet:
    """Factory for ``--model trackeval.demo.baselines:click_unet --model-arg weights=PATH``."""
    net = build_network()
    net.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    return ClickUNet(net)


def _perturb(truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A plausible imperfect previous mask: eroded, dilated, shifted or cut, by a few pixels."""
    k = int(rng.integers(1, 5))
    action = rng.integers(4)
    if action == 0:
        return ndimage.binary_erosion(truth, iterations=k)
    if action == 1:
        return ndimage.binary_dilation(truth, iterations=k)
    if action == 2:
        return np.roll(truth, tuple(rng.integers(-2 * k, 2 * k + 1, size=2)), axis=(0, 1))
    cut = truth.copy()
    rows = np.flatnonzero(truth.any(axis=1))
    cut[rows[len(rows) // 2] :] = False
    return cut


@dataclass(frozen=True)
class _Target:
    """One training target: grey image in [0, 1], truth, and the region grower's point-sequence masks."""

    img01: np.ndarray
    truth: np.ndarray
    grower_masks: tuple[np.ndarray, ...]


def _targets(data_dir: Path, seed: int) -> list[_Target]:
    """Every target of the ``training`` list with the states the simulator drives the region grower through."""
    cfg = IMISConfig(split="training", seed=seed)
    cases, _ = load_cases(data_dir, cfg)
    grower, out = RegionGrower(), []
    for case in cases:
        loaded = read_case(case, cfg)
        for name, truth in sorted(loaded.masks.items()):
            turns = run_sequence(grower, loaded.image, truth, case.case_id, name, "point", cfg)
            out.append(_Target(grey(loaded.image) / 255.0, truth, tuple(t.mask for t in turns)))
    return out


def _window(x: np.ndarray, y: np.ndarray, at: tuple[int, ...], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A ``CROP`` x ``CROP`` window of input ``(5, H, W)`` and truth ``(H, W)`` holding ``at`` (jittered)."""
    h, w = y.shape
    y0 = int(np.clip(at[0] - CROP // 2 + rng.integers(-CROP // 4, CROP // 4 + 1), 0, max(h - CROP, 0)))
    x0 = int(np.clip(at[1] - CROP // 2 + rng.integers(-CROP // 4, CROP // 4 + 1), 0, max(w - CROP, 0)))
    return x[:, y0 : y0 + CROP, x0 : x0 + CROP], y[y0 : y0 + CROP, x0 : x0 + CROP]


def _sample(net: BasicUNet, t: _Target, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One simulated turn, as at test time: (network input crop, truth crop).

    Turn 1 (35 %): a first click (``first_click``, fraction 0.5) or (15 %) a box, no previous mask. Later turns
    (50 %): a previous state, then the next click from :func:`error_click` on it (``random_error`` or
    ``center_error``). The state is the region grower's mask after a random turn of its own simulated sequence,
    the network's own logits on a first-click or box turn (evaluated on the whole image, as in the loop), or a
    perturbed truth, one third each.
    """
    kind = rng.random()
    if kind < 0.35:
        prompts = Prompts(clicks=(first_click(t.truth, rng, 0.5),))
        x = encode(t.img01, prompts, None)
        return _window(x, t.truth, prompts.clicks[0].coords, rng)
    if kind < 0.5:
        box = bounding_box(t.truth, rng, 3)
        x = encode(t.img01, Prompts(box=box), None)
        return _window(x, t.truth, tuple((lo + hi) // 2 for lo, hi in zip(box.lo, box.hi, strict=True)), rng)
    source = rng.integers(3)
    if source == 0:
        previous: np.ndarray = t.grower_masks[rng.integers(len(t.grower_masks))]
    elif source == 1:
        if rng.random() < 0.7:
            start = Prompts(clicks=(first_click(t.truth, rng, 0.5),))
        else:
            start = Prompts(box=bounding_box(t.truth, rng, 3))
        with torch.no_grad():
            x0 = _pad16(torch.from_numpy(encode(t.img01, start, None))[None])
            previous = net.eval()(x0)[0, 0, : t.truth.shape[0], : t.truth.shape[1]].numpy()
        net.train()
    else:
        previous = _perturb(t.truth, rng)
    mode = "random_error" if rng.random() < 0.7 else "center_error"
    click = error_click(np.asarray(previous > 0 if previous.dtype.kind == "f" else previous), t.truth, rng, mode)
    x = encode(t.img01, Prompts(clicks=() if click is None else (click,)), previous)
    at = click.coords if click is not None else tuple(np.argwhere(t.truth)[rng.integers(t.truth.sum())])
    return _window(x, t.truth, at, rng)


def train_click_unet(
    data_dir: Path, out: Path, *, iterations: int = 300, batch: int = 8, seed: int = 0, lr: float = 2e-3
) -> dict[str, float]:
    """Train :func:`build_network` on the ``training`` list of an IMIS folder; save the state_dict to ``out``.

    Training states come from the protocol's own simulator (:func:`_sample`): first clicks, boxes, and
    corrective clicks on the region grower's and the network's own earlier outputs, so the input distribution
    matches the evaluation loop.

    Returns ``{"seconds", "first_loss", "final_loss"}`` (loss = BCE + soft Dice, mean of the last 10 steps).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small batches: one thread is faster than oversubscribed shared cores
    try:
        return _train(data_dir, out, iterations, batch, seed, lr)
    finally:
        torch.set_num_threads(threads)


def _train(data_dir: Path, out: Path, iterations: int, batch: int, seed: int, lr: float) -> dict[str, float]:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    targets = _targets(data_dir, seed)
    net = build_network()
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    losses, start = [], time.perf_counter()
    net.train()
    log_every = max(1, iterations // 10)
    for it in range(1, iterations + 1):
        if it % log_every == 0 and losses:
            elapsed = time.perf_counter() - start
            print(f"click U-Net iteration {it}/{iterations} loss {losses[-1]:.3f} ({elapsed:.0f} s, ETA "
                  f"{elapsed / (it - 1) * (iterations - it + 1):.0f} s)")  # fmt: skip
        samples = [_sample(net, targets[i], rng) for i in rng.integers(len(targets), size=batch)]
        x = _pad16(torch.from_numpy(np.stack([s[0] for s in samples])))
        y = _pad16(torch.from_numpy(np.stack([s[1][None] for s in samples]).astype(np.float32)))
        logits = net(x)
        prob = torch.sigmoid(logits)
        dice = 1 - (2 * (prob * y).sum((1, 2, 3)) + 1) / (prob.sum((1, 2, 3)) + y.sum((1, 2, 3)) + 1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y) + dice.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), out)
    return {
        "seconds": time.perf_counter() - start,
        "first_loss": losses[0],
        "final_loss": float(np.mean(losses[-10:])),
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m trackeval.demo.baselines --data DIR --out unet.pt [--iterations N]``."""
    parser = argparse.ArgumentParser(description="train the ClickUNet baseline on an IMIS-layout folder (CPU)")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(train_click_unet(args.data, args.out, iterations=args.iterations, seed=args.seed))


if __name__ == "__main__":
    main()
