"""The five multi-anatomy X-ray tasks (cls, seg, ret, loc, report), one module each.

Each module exposes ``evaluate(inputs: TaskInputs, cfg: EvalConfig) -> TaskOutput``; the adapter
``trackeval.benchmarks.xray`` turns the output into the :class:`~trackeval.results.BenchmarkResult`.
"""
