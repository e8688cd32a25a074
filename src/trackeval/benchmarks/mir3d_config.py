"""Former path of 3D-MIR's config section (``Mir3dConfig``), now :mod:`trackeval.benchmarks.mir3d.config`.

Kept as an alias so that code written against it (``from trackeval.benchmarks.mir3d_config import ...``, the path the
docs named) keeps working, with a DeprecationWarning; names are forwarded lazily.
"""

from trackeval._moved import forwarder

__getattr__ = forwarder("trackeval.benchmarks.mir3d_config", "trackeval.benchmarks.mir3d.config")
