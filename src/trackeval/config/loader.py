"""The one YAML reader of configuration: params files (``--config``, ``--params``) and ``--set`` values.

Safe loading (:class:`yaml.SafeLoader`: plain data only, no ``!!python/...`` tags) that also refuses a repeated
key at any level. PyYAML keeps the last of two equal keys, so a second ``umd:`` section would silently drop every
key of the first, and ``--set 'umd.labels={liver: 1, liver: 2}'`` would mean ``{liver: 2}``; here either is a
:class:`~trackeval.errors.ConfigError` naming the key (as a dotted path) and both lines. Keys are compared as
constructed (``1`` and ``0x1``, ``true`` and ``yes`` are equal keys, as they would be in the loaded mapping). A
merge key (``<<: *base``) is not a repetition: overriding a merged key is what merging is for.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from trackeval.errors import ConfigError

__all__ = ["StrictSafeLoader", "load_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"


class _RepeatedKey(Exception):
    """A mapping holds one key twice (internal: :func:`load_yaml` turns it into a ConfigError)."""

    def __init__(self, path: list[str], first: Node, second: Node) -> None:
        super().__init__(path)
        self.path = path
        self.first, self.second = first.start_mark, second.start_mark

    def lines(self) -> str:
        """``lines 3 and 7``, or ``line 1, columns 2 and 12`` for a flow mapping on one line."""
        a, b = self.first, self.second
        if a.line == b.line:
            return f"line {a.line + 1}, columns {a.column + 1} and {b.column + 1}"
        return f"lines {a.line + 1} and {b.line + 1}"


class _TooLarge(Exception):
    """The document nests deeper or holds more nodes than allowed (internal: :func:`load_yaml` says which)."""


#: default bounds of a YAML document: nesting of collections and nodes (each alias once)
MAX_DEPTH = 64
MAX_NODES = 1_000_000


class StrictSafeLoader(yaml.SafeLoader):
    """:class:`yaml.SafeLoader` that raises on a repeated mapping key (at any depth) before building anything,
    and on a document nesting deeper than ``max_depth`` or holding more than ``max_nodes`` nodes.

    The check walks the composed node graph once (each node once, aliases included, so a "billion laughs"
    document costs its size, not its expansion), with an explicit stack (no recursion limit to hit).
    """

    max_depth = MAX_DEPTH
    max_nodes = MAX_NODES

    def construct_document(self, node: Node) -> Any:
        self._refuse_repeated_keys(node)
        return super().construct_document(node)

    def _refuse_repeated_keys(self, root: Node) -> None:
        seen: set[int] = set()
        stack: list[tuple[Node, list[str], int]] = [(root, [], 0)]
        while stack:
            node, path, depth = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if depth > self.max_depth:
                raise _TooLarge(f"the YAML nests deeper than {self.max_depth} levels (at {'.'.join(path)[:80]})")
            if len(seen) > self.max_nodes:
                raise _TooLarge(f"the YAML holds more than {self.max_nodes} values")
            if isinstance(node, SequenceNode):
                stack.extend(
                    (item, [*path[:-1], f"{path[-1]}[{i}]"] if path else [f"[{i}]"], depth + 1)
                    for i, item in enumerate(node.value)
                )
            elif isinstance(node, MappingNode):
                stack.extend(self._mapping_children(node, path, depth))

    def _mapping_children(self, node: MappingNode, path: list[str], depth: int) -> list[tuple[Node, list[str], int]]:
        """The values of one mapping to walk next (merged mappings at the same depth); raises
        :class:`_RepeatedKey` on the second of two equal keys."""
        keys: dict[Any, Node] = {}
        children: list[tuple[Node, list[str], int]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                children.append((value_node, path, depth))  # the merged mapping(s): checked on their own
                continue
            name = key_node.value if isinstance(key_node, ScalarNode) else "?"
            if isinstance(key_node, ScalarNode):
                first = self._first_of_key(keys, key_node)
                if first is not key_node:
                    raise _RepeatedKey([*path, str(name)], first, key_node)
            children.append((value_node, [*path, str(name)], depth + 1))
        return children

    def _first_of_key(self, keys: dict[Any, Node], key_node: ScalarNode) -> Node:
        """The first node of ``key_node``'s key in one mapping (``key_node`` itself when new), keys compared as
        constructed; a "=" key (the YAML value tag) is read as a string, as flatten_mapping does."""
        key = key_node.value if key_node.tag == _VALUE_TAG else self.construct_object(key_node, deep=True)
        try:
            return keys.setdefault(key, key_node)
        except TypeError:  # unhashable: SafeLoader refuses it when it builds the mapping
            return key_node


def load_yaml(
    text: str,
    *,
    where: str,
    prefix: str = "",
    inline: bool = False,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
) -> Any:
    """The data of one YAML document, safely loaded; a repeated key is a :class:`ConfigError`.

    Args:
        text: the YAML text.
        where: what the text is, to start the message (``config file params.yaml``, ``--set umd.labels``).
        prefix: dotted key the document sits under (a ``--set`` key), prepended to the repeated key's path.
        inline: the text is a ``--set`` value (one line: the message names no line numbers).
        max_depth, max_nodes: bounds of the document's nesting and of its nodes (each alias once).

    Raises:
        ConfigError: a key appears twice in one mapping, naming the key and both lines (or the ``--set`` value);
            collections nested too deeply for PyYAML's recursive composer or beyond ``max_depth``, more than
            ``max_nodes`` nodes.
        yaml.YAMLError: any other YAML problem (the caller says which file or override it was).
    """
    loader = StrictSafeLoader(text)
    loader.max_depth, loader.max_nodes = max_depth, max_nodes
    try:
        return loader.get_single_data()
    except _RepeatedKey as exc:
        key = ".".join(p for p in (prefix, ".".join(exc.path)) if p)
        if inline:
            detail = "is repeated in the --set value"
        else:
            detail = f"is repeated ({exc.lines()})"
        raise ConfigError(
            f"{where}: key {key!r} {detail}; YAML would silently keep only the last one: keep one"
        ) from None
    except _TooLarge as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ConfigError(f"{where}: the YAML is nested too deeply to read") from None
    finally:
        loader.dispose()
