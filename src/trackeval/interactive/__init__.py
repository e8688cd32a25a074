"""Former home of IMIS's interactive protocol, now :mod:`trackeval.benchmarks.imis`.

Only aliases are left here, for the paths users wrote: :mod:`trackeval.interactive.baselines` (the demo models'
``--model`` references), :mod:`trackeval.interactive.protocol` (what a model's ``predict`` receives) and
:mod:`trackeval.interactive.runner` (``python -m trackeval.interactive.runner``). Each forwards names lazily with a
DeprecationWarning.
"""
