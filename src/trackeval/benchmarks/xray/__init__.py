"""The five multi-anatomy X-ray tasks (cls, seg, ret, loc, report), one module each.

Each module exposes ``evaluate(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation``
(:class:`trackeval.engine.driver.Evaluation`); the adapter ``trackeval.benchmarks.xray`` hands it to the driver,
which builds the :class:`~trackeval.results.BenchmarkResult`.
"""
