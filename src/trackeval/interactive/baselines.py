"""Two interactive baselines that implement the protocol with real model outputs.

* :class:`RegionGrower` (factory ``trackeval.interactive.baselines:region_grower``): classical, 2D or 3D. A
  positive click grows the connected region of pixels whose grey value lies within ``tolerance`` robust
  standard deviations (1.4826 MAD, at least ``min_sigma``) of the median of the click's neighbourhood (after a
  one-pixel opening, holes filled); correction clicks act within ``radius`` px: a positive one adds that part
  of its region, a negative one removes it from the current mask. A box grows from its centre inside the box.
  Starts from the previous mask when there is one.
* :class:`ClickUNet` (factory ``trackeval.interactive.baselines:click_unet``, argument ``weights``): a small
  MONAI ``BasicUNet`` (2D) on five channels: grey image, positive-click disks, negative-click disks, box mask,
  previous mask probability; returns logits. :func:`train_click_unet` trains it on the ``training`` list of an
  IMIS-layout folder on CPU (simulated first clicks, boxes and corrective clicks on perturbed masks), and saves
  the ``state_dict`` with ``torch.save``; it is loaded with ``torch.load(..., weights_only=True)``.

Neither supports text prompts (``supported_prompts``), so the text row stays empty for them.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from monai.networks.nets import BasicUNet
from scipy import ndimage

from trackeval.config.imis import IMISConfig
from trackeval.interactive.clicks import bounding_box, error_click, first_click
from trackeval.interactive.protocol import Box, Click, Prompts, Request
from trackeval.io.imis import load_cases, read_case


def grey(image: np.ndarray) -> np.ndarray:
    """An RGB ``(H, W, 3)`` image as float grey (channel mean); other arrays as float unchanged."""
    arr = np.asarray(image, dtype=np.float32)
    return arr.mean(axis=-1) if arr.ndim == 3 and arr.shape[-1] == 3 else arr


def _box_mask(box: Box, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=bool)
    out[tuple(slice(lo, hi + 1) for lo, hi in zip(box.lo, box.hi, strict=True))] = True
    return out


class RegionGrower:
    """Click-seeded region growing (see the module docstring). Parameters in grey levels and pixels."""

    supported_prompts = ("point", "box")

    def __init__(self, tolerance: float = 2.0, min_sigma: float = 6.0, window: int = 2, radius: int = 12):
        self.tolerance, self.min_sigma, self.window, self.radius = tolerance, min_sigma, window, radius

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

    def _near(self, shape: tuple[int, ...], click: Click) -> np.ndarray:
        grid = np.indices(shape)
        return sum((g - c) ** 2 for g, c in zip(grid, click.coords, strict=True)) <= self.radius**2

    def predict(self, request: Request) -> np.ndarray:
        img = grey(request.image)
        p: Prompts = request.prompts
        if request.previous is not None:
            mask = np.asarray(request.previous, dtype=bool).copy()
        elif p.box is not None:
            centre = tuple((lo + hi) // 2 for lo, hi in zip(p.box.lo, p.box.hi, strict=True))
            mask = self._grow(img, centre, within=_box_mask(p.box, img.shape))
        else:
            mask = np.zeros(img.shape, dtype=bool)
        for click in p.clicks:
            if click.label == 1:  # the first click grows freely, corrections stay local
                local = None if not mask.any() else self._near(img.shape, click)
                mask |= self._grow(img, click.coords, within=local)
            else:
                mask &= ~(self._grow(img, click.coords, within=mask) & self._near(img.shape, click))
        return mask


def region_grower(**kwargs: str) -> RegionGrower:
    """Factory for ``--model trackeval.interactive.baselines:region_grower`` (``--model-arg tolerance=2.5``)."""
    return RegionGrower(**{k: float(v) if k in ("tolerance", "min_sigma") else int(v) for k, v in kwargs.items()})


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
    """Factory for ``--model trackeval.interactive.baselines:click_unet --model-arg weights=PATH``."""
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


def _crop(img01: np.ndarray, truth: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A ``CROP`` x ``CROP`` window around a random target pixel (training speed; the net is convolutional)."""
    h, w = truth.shape
    centre = np.argwhere(truth)[rng.integers(truth.sum())]
    y0 = int(np.clip(centre[0] - CROP // 2 + rng.integers(-CROP // 4, CROP // 4 + 1), 0, max(h - CROP, 0)))
    x0 = int(np.clip(centre[1] - CROP // 2 + rng.integers(-CROP // 4, CROP // 4 + 1), 0, max(w - CROP, 0)))
    return img01[y0 : y0 + CROP, x0 : x0 + CROP], truth[y0 : y0 + CROP, x0 : x0 + CROP]


def _sample(img01: np.ndarray, truth: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One simulated turn on a crop: (network input, target mask)."""
    img01, truth = _crop(img01, truth, rng)
    kind = rng.random()
    if kind < 0.35:
        return encode(img01, Prompts(clicks=(first_click(truth, rng, 1.0),)), None), truth
    if kind < 0.55:
        return encode(img01, Prompts(box=bounding_box(truth, rng, 3)), None), truth
    prev = _perturb(truth, rng)
    click = error_click(prev, truth, rng, "random_error")
    return encode(img01, Prompts(clicks=() if click is None else (click,)), prev), truth


def train_click_unet(
    data_dir: Path, out: Path, *, iterations: int = 300, batch: int = 8, seed: int = 0, lr: float = 2e-3
) -> dict[str, float]:
    """Train :func:`build_network` on the ``training`` list of an IMIS folder; save the state_dict to ``out``.

    Returns ``{"seconds", "first_loss", "final_loss"}`` (loss = BCE + soft Dice, mean of the last 10 steps).
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    cfg = IMISConfig(split="training")
    cases, _ = load_cases(data_dir, cfg)
    pairs = []
    for case in cases:
        loaded = read_case(case, cfg)
        pairs += [(grey(loaded.image) / 255.0, m) for m in loaded.masks.values()]
    net = build_network()
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    losses, start = [], time.perf_counter()
    net.train()
    for _ in range(iterations):
        samples = [_sample(*pairs[i], rng) for i in rng.integers(len(pairs), size=batch)]
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
    """``python -m trackeval.interactive.baselines --data DIR --out unet.pt [--iterations N]``."""
    parser = argparse.ArgumentParser(description="train the ClickUNet baseline on an IMIS-layout folder (CPU)")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(train_click_unet(args.data, args.out, iterations=args.iterations, seed=args.seed))


if __name__ == "__main__":
    main()
