"""The demo's models are the same bytes on every x86-64 CPU (issue 37, item 6; docs/pipeline.md "Reproducible on
any x86-64 CPU").

What differs between two CPUs, emulated on this one by the settings that select the code paths: the
instruction set ATen and oneDNN dispatch on (``ATEN_CPU_CAPABILITY``, ``DNNL_MAX_CPU_ISA``: an AVX2-only CPU vs an
AVX-512 one), MKL's code branch (``MKL_CBWR``: what MKL picks per CPU and vendor) and the number of cores
(``OMP_NUM_THREADS``). A tiny U-Net of :mod:`trackeval.demo.segmodel` is trained for a few steps and run on an
image in a fresh interpreter per setting (the settings are read when torch is first imported and used). Without the
pin the bytes differ between the two settings; with :func:`trackeval.pipeline.models.pin_cpu_numerics` (what
``trackeval pipeline train|predict`` call first) they are identical.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import scaled

#: train 3 steps of a 2-level U-Net on a 24 x 24 x 16 image, predict it; print the capability in use, the
#: sha256 of the state_dict's tensors (names and bytes, in order) and of the predicted label map
SCRIPT = """
import hashlib, sys
cap = None
if sys.argv[1] == "pin":
    from trackeval.pipeline import models
    assert "torch" not in sys.modules, "trackeval.pipeline.models imports torch: the pin would come too late"
    cap = models.pin_cpu_numerics()
import numpy as np
import torch
from trackeval.demo import segmodel
rng = np.random.default_rng(0)
image = rng.standard_normal((24, 24, 16)).astype(np.float32)
labels = np.clip(np.digitize(image, [-1.0, 0.0, 0.5, 1.0]) * 3, 0, segmodel.N_CLASSES - 1).astype(np.int64)
spec = segmodel.SegModelSpec(channels=(4, 8), iterations=3, learning_rate=0.01, patch=(16, 16, 8), batch_size=2)
net = segmodel.train(spec, [(image, labels)], log_every=100)
weights = hashlib.sha256()
for name, tensor in net.state_dict().items():
    weights.update(name.encode())
    weights.update(tensor.contiguous().numpy().tobytes())
pred = hashlib.sha256(segmodel.predict(net, image, spec).tobytes()).hexdigest()
print("RESULT", cap or torch.backends.cpu.get_cpu_capability(), weights.hexdigest(), pred)
"""

#: two CPUs as the code paths see them: the widest ISA this CPU has and 2 cores vs AVX2-capped oneDNN, ATen's
#: portable kernels, MKL's SSE2 branch and 1 core
MACHINES = {
    "widest": {"OMP_NUM_THREADS": "2"},
    "narrow": {"ATEN_CPU_CAPABILITY": "default", "DNNL_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE",
               "OMP_NUM_THREADS": "1"},
}  # fmt: skip
KNOBS = ("ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "OMP_NUM_THREADS")


def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return False


def _start(machine: str, mode: str) -> subprocess.Popen[str]:
    """SCRIPT in a fresh interpreter under ``machine``'s settings, with (``pin``) or without (``free``) the pin."""
    env = {k: v for k, v in os.environ.items() if k not in KNOBS} | MACHINES[machine]
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _result(proc: subprocess.Popen[str]) -> tuple[str, str, str]:
    """(capability, weights sha256, prediction sha256) printed by a finished SCRIPT."""
    out, err = proc.communicate(timeout=scaled(300))
    assert proc.returncode == 0, err[-3000:]
    cap, weights, pred = next(x for x in out.splitlines() if x.startswith("RESULT ")).split()[1:]
    return cap, weights, pred


@pytest.mark.skipif(not _has_avx2(), reason="the pin selects AVX2 code paths: this CPU has no AVX2")
def test_pinned_training_is_the_same_bytes_on_both_emulated_cpus() -> None:
    procs = {(m, mode): _start(m, mode) for m in MACHINES for mode in ("free", "pin")}  # 4 at once: deterministic
    try:
        runs = {key: _result(proc) for key, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    free = {m: runs[m, "free"] for m in MACHINES}
    pinned = {m: runs[m, "pin"] for m in MACHINES}
    # without the pin the settings select different kernels: ATen's portable build, 1 vs 2 threads
    assert free["narrow"][0] == "DEFAULT"
    assert free["widest"][1] != free["narrow"][1], "the control lost its power: the settings no longer matter"
    assert pinned["widest"][0] == pinned["narrow"][0] == "AVX2"
    assert pinned["widest"][1:] == pinned["narrow"][1:]
