"""Former path of UMD's config section (``UMDConfig``, ``UMD_ORGANS``...), now
:mod:`trackeval.benchmarks.umd.config`.

Kept as an alias so that code written against it (``from trackeval.benchmarks.umd_config import ...``, the path
the docs named) keeps working, with a DeprecationWarning; names are forwarded lazily.
"""

from trackeval._moved import forwarder

__getattr__ = forwarder("trackeval.benchmarks.umd_config", "trackeval.benchmarks.umd.config")
