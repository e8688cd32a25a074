"""Former path of the IMIS reference runner, now :mod:`trackeval.benchmarks.imis.runner`.

Kept as an alias so that ``python -m trackeval.interactive.runner ...`` and imports of it keep working, with a
DeprecationWarning; names are forwarded lazily.
"""

from trackeval._moved import forwarder, run_moved

__getattr__ = forwarder("trackeval.interactive.runner", "trackeval.benchmarks.imis.runner")


if __name__ == "__main__":
    run_moved("trackeval.interactive.runner", "trackeval.benchmarks.imis.runner")
