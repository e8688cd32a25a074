"""A user's YAML file edited as text: only the lines of the entries trackeval owns change, every other byte stays.

``trackeval init`` adds its sections to a repository's params.yaml and its stages and plots to dvc.yaml. A YAML
writer that re-dumps the whole file would change what the user wrote: comments, anchors, quoting, indentation,
and, through a YAML 1.1 writer, values as DVC (YAML 1.2) reads them (``yes`` -> ``true``, ``0755`` -> ``493``).
Here the file is read twice, never re-dumped:

* :func:`parse` checks it as trackeval's stages read it (:func:`trackeval.config.loader.load_yaml`: bounded
  depth and size, a repeated key named with both lines), then composes and loads it with ruamel.yaml's YAML 1.2
  round-trip reader, the one DVC uses. Any problem is one :class:`~trackeval.errors.InputError` naming the file
  and the line;
* :class:`TextEdit` deletes and inserts whole lines, located from the composed nodes' marks (a top-level
  section, one child of a block mapping or one item of a block sequence, with the comment lines indented under
  it);
* :func:`dump_block` writes new entries at a given indentation: with ruamel.yaml for dvc.yaml (read by DVC only),
  or (``both_readers``) with PyYAML, quoting every string that either YAML 1.1 or YAML 1.2 would read as another
  type, for params.yaml (read by DVC and by trackeval).

The caller re-reads the edited text and compares it with what it meant (:func:`plain`), so a text edit that
would change a value is refused, never written.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelYAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.scalarbool import ScalarBoolean

from trackeval.config.loader import load_yaml
from trackeval.errors import ConfigError, InputError
from trackeval.io.limits import MAX_DEPTH, max_elements

__all__ = ["TextEdit", "dump_block", "load_rt", "parse", "plain"]

_NULL_TAG = "tag:yaml.org,2002:null"


def _malformed(exc: Exception, name: str) -> InputError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    at = f" on line {mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return InputError(f"malformed YAML{at}: {problem}", file=name)


def load_rt(text: str, name: str) -> Any:
    """The data of ``text`` as ruamel.yaml's YAML 1.2 round-trip reader (DVC's) loads it."""
    try:
        return YAML(typ="rt").load(text)
    except RuamelYAMLError as exc:
        raise _malformed(exc, name) from None


def parse(text: str, name: str) -> tuple[Node | None, Any]:
    """The composed root node and the data of ``text`` (the file ``name``), checked as trackeval and DVC read it.

    Raises:
        InputError: malformed YAML, a repeated key (both lines), nesting or size beyond the bounded loader's
            limits, naming ``name`` and the line.
    """
    try:
        load_yaml(text, where=name, max_depth=MAX_DEPTH, max_nodes=max_elements())
    except ConfigError as exc:
        raise InputError(str(exc).removeprefix(f"{name}: "), file=name) from None
    except yaml.YAMLError as exc:
        raise _malformed(exc, name) from None
    try:
        node = YAML(typ="rt").compose(text)
    except RuamelYAMLError as exc:
        raise _malformed(exc, name) from None
    return node, load_rt(text, name)


def is_null(node: Node | None) -> bool:
    """An absent value (``key:`` with nothing, ``~``, ``null``)."""
    return node is None or (isinstance(node, ScalarNode) and node.tag == _NULL_TAG)


def child(mapping: MappingNode, key: str) -> tuple[ScalarNode, Node] | None:
    """The (key node, value node) of ``key`` in a mapping node, or ``None``."""
    for k, v in mapping.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return k, v
    return None


def _last_line(node: Node) -> int:
    """The last line (0-based) holding ``node``'s content (scalars and flow collections end where they end)."""
    last = node.start_mark.line
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, ScalarNode) or getattr(n, "flow_style", False):
            end = n.end_mark
            last = max(last, end.line if end.column > 0 else end.line - 1)
        elif isinstance(n, SequenceNode):
            stack.extend(n.value)
        elif isinstance(n, MappingNode):
            stack.extend(x for pair in n.value for x in pair)
    return last


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@dataclass
class TextEdit:
    """Line edits of one text, applied together (spans never overlap; an insertion is an empty span)."""

    text: str
    lines: list[str] = field(init=False)
    edits: list[tuple[int, int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lines = self.text.splitlines(keepends=True)

    def span(self, start: Node, value: Node, column: int, stop: int | None = None) -> tuple[int, int]:
        """Lines ``[first, end)`` of an entry that starts at node ``start`` (a key, or a sequence item) with value
        ``value``, its first line's content at ``column``: through the value's last line and the comment lines
        indented deeper than ``column`` right after it, never past line ``stop``."""
        stop = len(self.lines) if stop is None else stop
        end = min(_last_line(value) + 1, stop)
        while end < stop and self.lines[end].strip() and _indent(self.lines[end]) > column:
            end += 1
        return start.start_mark.line, end

    def delete(self, first: int, end: int) -> None:
        self.edits.append((first, end, ""))

    def insert(self, at: int, text: str) -> None:
        self.edits.append((at, at, text))

    def replace(self, first: int, end: int, text: str) -> None:
        self.edits.append((first, end, text))

    def result(self) -> str:
        lines = list(self.lines)
        if lines and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += "\n"  # an insertion after the last line starts on a line of its own
        # bottom up, so earlier lines keep their numbers; of two insertions at one line the later-made goes in
        # first, ending up below the earlier-made one
        order = sorted(range(len(self.edits)), key=lambda i: (self.edits[i][0], self.edits[i][1], i), reverse=True)
        for first, end, text in (self.edits[i] for i in order):
            lines[first:end] = [text] if text else []
        return "".join(lines)


def entries(mapping: MappingNode, edit: TextEdit, stop: int | None = None) -> dict[str, tuple[int, int]]:
    """``{key: (first, end)}`` line spans of the children of a block mapping (see :meth:`TextEdit.span`)."""
    out: dict[str, tuple[int, int]] = {}
    pairs = mapping.value
    for i, (k, v) in enumerate(pairs):
        nxt = pairs[i + 1][0].start_mark.line if i + 1 < len(pairs) else stop
        out[str(k.value)] = edit.span(k, v, k.start_mark.column, nxt)
    return out


def items(seq: SequenceNode, edit: TextEdit, stop: int | None = None) -> list[tuple[int, int, int]]:
    """``(first, end, dash column)`` of each item of a block sequence (the item's lines from its dash)."""
    out = []
    for i, item in enumerate(seq.value):
        line = item.start_mark.line
        while line > 0 and not edit.lines[line].lstrip().startswith("-"):
            line -= 1  # a bare "-" with the value on the next line
        dash = _indent(edit.lines[line])
        nxt = seq.value[i + 1].start_mark.line if i + 1 < len(seq.value) else stop
        first, end = edit.span(item, item, dash, nxt)
        out.append((min(first, line), end, dash))
    return out


def _ruamel_reads_as_string(value: str) -> bool:
    try:
        return YAML(typ="safe", pure=True).load(value) == value
    except RuamelYAMLError:
        return False


class _DualDumper(yaml.SafeDumper):
    """PyYAML's safe dumper that double-quotes every string YAML 1.2 would read as something else (``0o755``,
    ``1e3``); PyYAML already quotes what YAML 1.1 would (``yes``, ``on``, ``0755``)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = None if _ruamel_reads_as_string(value) else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_DualDumper.add_representer(str, _represent_str)


def dump_block(data: Any, indent: int = 0, *, both_readers: bool = False) -> str:
    """``data`` (a mapping) as block YAML, every line indented by ``indent`` spaces."""
    if both_readers:
        text = yaml.dump(data, Dumper=_DualDumper, sort_keys=False, default_flow_style=None)
    else:
        rt = YAML(typ="rt")
        rt.indent(mapping=2, sequence=4, offset=2)
        rt.width = 4096
        buf = io.StringIO()
        rt.dump(data, buf)
        text = buf.getvalue()
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


def dump_items(values: list[Any], dash: int) -> str:
    """``values`` as block sequence items whose dashes sit at column ``dash`` (ruamel.yaml puts them at 2)."""
    lines = dump_block(values).splitlines(keepends=True)
    if dash >= 2:
        return "".join(" " * (dash - 2) + line if line.strip() else line for line in lines)
    return "".join(line[2 - dash :] if line.strip() else line for line in lines)


def plain(value: Any) -> Any:
    """``value`` as plain Python data for comparison (ruamel's round-trip types unwrapped, NaN comparable)."""
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None:
        return None
    if isinstance(value, bool | ScalarBoolean):
        return bool(value)
    if isinstance(value, int):
        return ("int", int(value))
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else float(value))
    return (type(value).__name__ if not isinstance(value, str) else "str", str(value))
