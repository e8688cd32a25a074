"""IMIS-Bench (unit ``imis``): interactive segmentation, one package.

:mod:`~trackeval.benchmarks.imis.adapter` (the spec and evaluate), :mod:`~trackeval.benchmarks.imis.config` (the
``imis`` section), the readers (:mod:`~trackeval.benchmarks.imis.cases`: the layouts and cases;
:mod:`~trackeval.benchmarks.imis.volumes`: the 3D layouts' slicing; :mod:`~trackeval.benchmarks.imis.grid`:
IMIS-Bench's resizes), the interactive protocol (:mod:`~trackeval.benchmarks.imis.protocol`,
:mod:`~trackeval.benchmarks.imis.clicks`, :mod:`~trackeval.benchmarks.imis.session`: the interaction loop,
:mod:`~trackeval.benchmarks.imis.logs`, :mod:`~trackeval.benchmarks.imis.runner`), the scoring of one image
(:mod:`~trackeval.benchmarks.imis.scoring`) and the aggregates (:mod:`~trackeval.benchmarks.imis.aggregates`).
"""

from trackeval.benchmarks.imis.adapter import SPEC

__all__ = ["SPEC"]
