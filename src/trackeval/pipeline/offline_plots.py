"""``dvc plots show`` without network: an HTML template with Vega, Vega-Lite and vega-embed inline.

DVC's own page loads the three scripts from a CDN, so in an air-gapped network its charts stay blank. DVC fills a
custom page instead when ``.dvc/config`` names one (``[plots] html_template``, a path relative to ``.dvc/``; or
``dvc plots show --html-template``): dvc_render replaces ``{plot_divs}`` (required) with one ``<div>`` per plot
whose inline script calls ``vegaEmbed``, ``{refresh_tag}`` with an optional refresh ``<meta>``, and
``{scripts}`` with the CDN ``<script>`` tags; :func:`page` has no ``{scripts}``, so nothing is loaded from the
network, and carries the three scripts themselves, inline (so the page works wherever ``-o`` writes it).

The scripts are the npm packages' minified builds, vendored in ``plot_templates/vendor/`` with their LICENSE
files (README.md there) and pinned by sha256 in :data:`VENDORED`. ``trackeval init`` writes the page to
``.dvc/plots/trackeval_offline.html`` (:data:`PAGE`) and sets :data:`HTML_TEMPLATE` in ``.dvc/config``; this
repository's demo is configured the same way.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from trackeval.errors import InputError

#: the vendored scripts: (file in :data:`VENDOR`, npm package, version, sha256 of the file), in load order
VENDORED = (
    ("vega.min.js", "vega", "6.4.0", "8f6a3587cf8d4f42c7e08120e3eb05d067e746d554e39d2dcf52acc0bd5ba28f"),
    ("vega-lite.min.js", "vega-lite", "6.5.0", "83e215e84e308ee8688fa6503ba0f1cf8a3c05c0d61df2841a0b92bf86809e00"),
    ("vega-embed.min.js", "vega-embed", "7.3.0", "b1455caba2fb1a72fb46025ba0ba1316e2dbc7f0dd40a3f6040172bf9c08ba91"),
)
VENDOR = Path(__file__).with_name("plot_templates") / "vendor"
#: where ``trackeval init`` writes the page (relative to the repository root) ...
PAGE = Path(".dvc") / "plots" / "trackeval_offline.html"
#: ... and the ``plots.html_template`` value that names it in ``.dvc/config`` (DVC resolves it from ``.dvc/``)
HTML_TEMPLATE = "plots/trackeval_offline.html"

#: DVC's page (dvc_render.html.PAGE_HTML) without ``{scripts}``, as a :meth:`str.format` string for :func:`page`
_SKELETON = """<!DOCTYPE html>
<html>
<head>
    {{refresh_tag}}
    <meta charset="utf-8">
    <title>DVC Plot</title>
    <!-- trackeval (trackeval init): {names} inline, no network needed; licenses: BSD-3-Clause, see
         trackeval/pipeline/plot_templates/vendor/ in the trackeval package -->
{vendored}
    <style>
        table {{
            border-spacing: 15px;
        }}
    </style>
</head>
<body>
    {{plot_divs}}
</body>
</html>
"""
#: text an inline script must not hold: it would end the element, or be replaced by dvc_render
_UNSAFE = re.compile(r"</script|<!--|\{(?:plot_divs|scripts|refresh_tag)\}", re.IGNORECASE)


def vendored_script(name: str, expected_sha256: str) -> str:
    """The text of the vendored file ``name``, checked against its pinned sha256 and for text that cannot stand
    inside an inline ``<script>`` (``</script``, ``<!--``) or that dvc_render would replace (its placeholders).

    Raises:
        InputError: the file differs from the pinned one, or holds such text (the page is never built from it).
    """
    data = (VENDOR / name).read_bytes()
    if hashlib.sha256(data).hexdigest() != expected_sha256:
        raise InputError("differs from the vendored file trackeval pins (sha256); reinstall trackeval", file=name)
    text = data.decode("utf-8")
    found = _UNSAFE.search(text)
    if found:
        raise InputError(f"holds {found.group(0)!r}, which cannot stand in an inline <script>", file=name)
    return text


def page() -> str:
    """The HTML template for ``dvc plots show``: DVC's page with the vendored scripts inline, in load order (Vega,
    then Vega-Lite, then vega-embed, which DVC's per-plot scripts call). About 0.85 MB; deterministic (the same
    bytes for the same trackeval version)."""
    names = ", ".join(f"{package} {version}" for _, package, version, _ in VENDORED)
    scripts = "\n".join(
        f"    <!-- {package} {version} (npm, {name}) -->\n    <script>{vendored_script(name, sha)}</script>"
        for name, package, version, sha in VENDORED
    )
    return _SKELETON.format(names=names, vendored=scripts)  # the doubled braces come out single
