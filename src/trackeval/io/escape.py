"""User data written into a medium that has its own syntax: one escaping function per medium, used by every renderer.

Case ids, subject ids, group values (a manifest's ``site``), finding/class/category names, model names and
versions, and every message or check detail that embeds them are data, never markup. Each writer escapes them for
the medium it writes, and only here:

=================  ==============================  ==========================================================
medium             function                        writers
=================  ==============================  ==========================================================
terminal (rich)    :func:`escape_terminal`         ``trackeval.report.console`` / ``comparison`` /
                                                   ``leaderboard`` tables and lines, ``trackeval.commands``
Markdown (GFM)     :func:`escape_markdown`         ``compare --markdown``, ``promote --summary``, the
                                                   decision's ``decision.md``, ``leaderboard --markdown``
HTML               :func:`escape_html`             ``report.html``, ``compare --html``, ``decision.html``,
                                                   ``leaderboard --html``
CSV                :func:`escape_csv`              ``plot.csv`` and ``plots/*.csv`` of the DVC pipeline
matplotlib text    :func:`escape_mathtext`         figure titles, axis and tick labels, legends
=================  ==============================  ==========================================================

Line breaks and other control characters (CR, LF, U+2028, U+2029, U+0085, ESC, the bidirectional overrides...)
are shown as a visible escape (``\\n``, ``\\x1b``, ``\\u2028``) in the terminal and in Markdown, so a value never
ends a table row, starts a heading or moves the cursor.
"""

from __future__ import annotations

import html
import re
import unicodedata

__all__ = ["escape_csv", "escape_html", "escape_markdown", "escape_mathtext", "escape_terminal", "visible_controls"]

#: bidirectional embeddings, overrides and isolates (format characters that reorder what follows them)
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _is_control(c: str) -> bool:
    return unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in _BIDI


def _visible(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def visible_controls(text: str) -> str:
    """``text`` with every control, line- or paragraph-separator and bidi-override character written as a
    visible escape (``\\n``, ``\\r``, ``\\t``, ``\\x1b``, ``\\x85``, ``\\u2028``, ``\\u202e``); the rest unchanged.

    >>> visible_controls("a\\nb\\u2028c\\x1b[31m")
    'a\\\\nb\\\\u2028c\\\\x1b[31m'
    """
    if not any(_is_control(c) for c in text):
        return text
    return "".join(_visible(c) if _is_control(c) else c for c in text)


#: rich's emoji code pattern (``:smile:``, ``:thumbs_up-text:``), as :mod:`rich._emoji_replace` scans text
_EMOJI_CODE = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")
#: WORD JOINER: invisible, keeps a ``:name:`` of data from being read as an emoji code
_JOINER = "\u2060"


def _no_emoji_codes(text: str) -> str:
    if ":" not in text:
        return text
    try:
        from rich._emoji_codes import EMOJI
    except ImportError:  # rich moved its table: treat every :name: as a code
        EMOJI = None

    def keep(m: re.Match[str]) -> str:
        is_code = EMOJI is None or m[2].lower() in EMOJI
        return ":" + _JOINER + m[0][1:] if is_code else m[0]

    return _EMOJI_CODE.sub(keep, text)


def escape_terminal(value: object) -> str:
    """``value`` as literal text in a rich markup string (a table cell, a ``console.print`` line): rich's own
    :func:`rich.markup.escape` (``[/]`` and ``[bold red]`` are shown, not applied) after
    :func:`visible_controls` (no line break, ESC sequence or bidi override reaches the terminal); an emoji code
    (``:smile:``) gets an invisible word joiner after its first colon, so it is shown, not replaced.

    >>> escape_terminal("[/] [bold red]x\\n")
    '\\\\[/] \\\\[bold red]x\\\\n'
    >>> escape_terminal("site :smile: 12:30:45")
    'site :\\u2060smile: 12:30:45'
    """
    from rich.markup import escape

    return escape(_no_emoji_codes(visible_controls(str(value))))


#: characters with a meaning anywhere in a GitHub-flavoured Markdown line (a table cell, a heading, a list item):
#: escapes, code spans, emphasis, HTML tags and autolinks, heading marks (a trailing ``#`` closes a heading), cell
#: separators, strikethrough, math (GitHub renders ``$...$``), entity references
_MD_ALWAYS = re.compile(r"([\\`*<#|~$&])")
#: ``]`` followed by ``(`` or ``[`` closes the text of a link or image (``[x](url)``, ``![x](src)``, ``[x][ref]``); a
#: bracket pair alone (``[/]``, ``['s1', 's2']``) is text, as no reference definition can be injected on one line
_MD_LINK = re.compile(r"\](?=[(\[])")
#: ``_`` opens or closes emphasis unless it sits between two letters or digits (``n_cases`` is plain text)
_MD_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
#: a value at the start of a line must not read as a list item, a block quote or a setext underline
_MD_LINE_START = re.compile(r"^([-+=>])|^(\d+)([.)])")


def escape_markdown(value: object) -> str:
    """``value`` as literal text in GitHub-flavoured Markdown (a table cell, a heading, a list item, a paragraph).

    Backslash-escapes ``\\``, backticks, ``* < # | ~ $ &`` everywhere, ``_`` where it could open or close emphasis
    (not inside a word: ``n_cases`` stays readable) and a ``]`` that would close a link's text (before ``(`` or
    ``[``); a leading ``-``, ``+``, ``=``, ``>`` or ``1.`` is escaped too. Line breaks and other control characters
    become visible escapes (:func:`visible_controls`), so a value never ends a table row or starts a heading; every
    ``|`` is escaped, so it never adds a cell.

    >>> escape_markdown("a|b|c")
    'a\\\\|b\\\\|c'
    >>> escape_markdown("x\\n## injected")
    'x\\\\n\\\\#\\\\# injected'
    >>> escape_markdown("umd/dsc/by_site/site_a")
    'umd/dsc/by_site/site_a'
    >>> escape_markdown("[click](http://x) ![i](y.png) [/]")
    '[click\\\\](http://x) ![i\\\\](y.png) [/]'
    """
    text = _MD_ALWAYS.sub(r"\\\1", str(value))
    text = _MD_LINK.sub(r"\\]", text)
    text = _MD_UNDERSCORE.sub(r"\\_", text)
    text = _MD_LINE_START.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", text)
    return visible_controls(text)


def escape_html(value: object) -> str:
    """``value`` as HTML text or a quoted attribute value: :func:`html.escape` with ``quote=True``.

    >>> escape_html('<script>alert("1")</script>')
    '&lt;script&gt;alert(&quot;1&quot;)&lt;/script&gt;'
    """
    return html.escape(str(value), quote=True)


#: a cell starting with one of these is read as a formula by spreadsheets (Excel, LibreOffice, Google Sheets)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def escape_csv(value: object) -> object:
    """A CSV cell written by :mod:`csv` (which quotes separators, quotes and line breaks): a text starting with
    ``=``, ``+``, ``-``, ``@``, a tab or CR gets a leading ``'`` so that a spreadsheet shows it instead of
    evaluating it (formula injection). Numbers and None are returned as they are (a negative number is data).

    >>> escape_csv("=cmd|' /C calc'!A0"), escape_csv("-0.5"), escape_csv(-0.5), escape_csv("site_a")
    ("'=cmd|' /C calc'!A0", "'-0.5", -0.5, 'site_a')
    """
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def escape_mathtext(value: object) -> str:
    """``value`` as literal text in a matplotlib title, label, tick label or legend entry: ``$`` is escaped (an
    even number of them would otherwise be rendered as mathtext, an odd number can fail the drawing) and control
    characters are made visible (:func:`visible_controls`).

    >>> escape_mathtext("$x^2$ v1")
    '\\\\$x^2\\\\$ v1'
    """
    return visible_controls(str(value)).replace("$", r"\$")
