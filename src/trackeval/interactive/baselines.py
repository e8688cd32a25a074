"""Former home of the demo IMIS models, which live in :mod:`trackeval.demo.baselines` (demo-model code, not
part of the evaluation package).

Kept as an alias so that model references already written in configs, scripts and results
(``--model trackeval.interactive.baselines:region_grower``) and ``python -m trackeval.interactive.baselines``
keep working, with a DeprecationWarning; new code names ``trackeval.demo.baselines``. Nothing (no torch, no
MONAI) is imported until a name is looked up.
"""

from trackeval._moved import forwarder, run_moved

__getattr__ = forwarder("trackeval.interactive.baselines", "trackeval.demo.baselines")


if __name__ == "__main__":
    run_moved("trackeval.interactive.baselines", "trackeval.demo.baselines")
