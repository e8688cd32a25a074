"""Former path of the interactive-model protocol, now :mod:`trackeval.benchmarks.imis.protocol`.

Kept as an alias so that models written against it (``from trackeval.interactive.protocol import Request``) keep
working, with a DeprecationWarning; names are forwarded lazily.
"""

from trackeval._moved import forwarder

__getattr__ = forwarder("trackeval.interactive.protocol", "trackeval.benchmarks.imis.protocol")
