"""Former home of the loop's Python functions (``write_results``, ``track``, ``compare``, ``promote``,
``verify``), which live in :mod:`trackeval.api`, the one module of the Python API.

Kept as an alias so that ``from trackeval.loop import promote`` keeps working, with a DeprecationWarning; new
code names ``trackeval.api`` or the facade (``trackeval.promote``). Nothing is imported until a name is looked up.
"""

from trackeval._moved import forwarder

__getattr__ = forwarder("trackeval.loop", "trackeval.api", " (or trackeval.promote, trackeval.track, ...)")
