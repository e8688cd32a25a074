"""The ``trackeval`` subcommands: argument parsing and wiring on top of the library (:mod:`trackeval.api`).

Nothing below ``commands`` imports it; heavy modules (torch, MLflow, Dask, DVC) are imported when a command
runs, never while the parser is built.
"""
