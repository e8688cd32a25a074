"""Multi-anatomy X-ray benchmark: five units (``xray/cls``, ``xray/seg``, ``xray/ret``, ``xray/loc``,
``xray/report``), one package.

* :mod:`~trackeval.benchmarks.xray.adapter`: the units' specs (:data:`SPECS`, the entry point
  ``trackeval.benchmarks.xray:SPECS``) and :func:`evaluate`, the dispatch to a task;
* :mod:`~trackeval.benchmarks.xray.config`: the ``xray`` config section, one subsection per task;
* one module per task (``cls``, ``seg``, ``ret``, ``loc``, ``report``), each exposing
  ``evaluate(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation`` (:class:`trackeval.engine.driver.Evaluation`),
  with its datasets' native file layouts beside it (``cls_layouts`` and ``cls_scores``, ``seg_layouts``,
  ``loc_layouts``, ``report_layouts``; ``cls_readers``: human readers); :mod:`~trackeval.benchmarks.xray.common`
  holds the task inputs. The adapter hands a task's output to the driver, which builds the
  :class:`~trackeval.results.BenchmarkResult`.
"""

from trackeval.benchmarks.xray.adapter import NAME, SPECS, TASKS, XRayInputs, evaluate

__all__ = ["NAME", "SPECS", "TASKS", "XRayInputs", "evaluate"]
