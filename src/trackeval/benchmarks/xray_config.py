"""Former path of the X-ray config section (``XRayConfig``, ``XRayClsConfig``...), now
:mod:`trackeval.benchmarks.xray.config`.

Kept as an alias so that code written against it (``from trackeval.benchmarks.xray_config import ...``, the path
the docs named) keeps working, with a DeprecationWarning; names are forwarded lazily.
"""

from trackeval._moved import forwarder

__getattr__ = forwarder("trackeval.benchmarks.xray_config", "trackeval.benchmarks.xray.config")
