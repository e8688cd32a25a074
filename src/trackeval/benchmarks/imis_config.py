"""Former path of IMIS's config section (``IMISConfig``, ``IMISVolumesConfig``...), now
:mod:`trackeval.benchmarks.imis.config`.

Kept as an alias so that code written against it (``from trackeval.benchmarks.imis_config import ...``, the path
the docs named) keeps working, with a DeprecationWarning; names are forwarded lazily.
"""

from trackeval._moved import forwarder

__getattr__ = forwarder("trackeval.benchmarks.imis_config", "trackeval.benchmarks.imis.config")
