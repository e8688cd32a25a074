"""The one bounded loader of structured input files: JSON, JSON Lines, YAML, XML, CSV text and plain text lists.

Every structured file a reader takes from the user goes through here, so every one is bounded the same way,
before and while it is parsed:

* **size**: the file's bytes, checked from ``fstat`` before it is read (``TRACKEVAL_MAX_FILE_BYTES``, default
  1 GiB; :func:`trackeval.io.limits.max_file_bytes`);
* **depth**: nesting of JSON arrays/objects, YAML collections and XML elements (:data:`~trackeval.io.limits.
  MAX_DEPTH`, 64; the native layouts nest 6 levels at most). JSON nested beyond the interpreter's recursion limit
  is caught as such, never a ``RecursionError`` traceback;
* **elements**: JSON/YAML values, XML elements, CSV cells (``TRACKEVAL_MAX_ELEMENTS``, default 50 M). A YAML
  alias counts once (a "billion laughs" document costs its size, not its expansion).

Every failure is one :class:`~trackeval.errors.InputError` naming the file (and the line where the parser gives
one).
"""

from __future__ import annotations

import contextlib
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from trackeval.config.loader import load_yaml as _load_yaml
from trackeval.errors import ConfigError, InputError
from trackeval.io.files import JSON_WHITESPACE, decode_text, read_bytes
from trackeval.io.limits import (
    MAX_DEPTH,
    MAX_ELEMENTS_ENV,
    MAX_FILE_BYTES_ENV,
    LimitError,
    max_elements,
    max_file_bytes,
)

__all__ = [
    "check_tree",
    "parse_json",
    "read_json",
    "read_jsonl",
    "read_limited",
    "read_text_limited",
    "read_xml",
    "read_yaml",
]

_JSON_TYPE = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def read_limited(path: Path, *, case_id: str | None = None) -> bytes:
    """The bytes of a structured file, refused (before reading) beyond ``TRACKEVAL_MAX_FILE_BYTES``."""
    limit = max_file_bytes()
    with contextlib.suppress(OSError):
        size = path.stat().st_size
        if size > limit:
            raise LimitError(
                f"file is {size} bytes, more than the {limit} bytes allowed for it ({MAX_FILE_BYTES_ENV})",
                file=str(path),
                case_id=case_id,
                field="size",
            )
    return read_bytes(path, case_id=case_id, max_bytes=limit)


def read_text_limited(path: Path, *, empty_ok: bool = False) -> str:
    """UTF-8 text (a BOM dropped) of a bounded file; an empty (blank) file is an error unless ``empty_ok``."""
    text = decode_text(read_limited(path), file=path)
    if not empty_ok and not text.strip():
        raise InputError("file is empty", file=str(path))
    return text


def _where(line: int | None) -> str:
    return f" on line {line}" if line is not None else ""


def check_tree(obj: Any, *, file: Path | str, line: int | None = None, budget: list[int] | None = None) -> Any:
    """``obj`` (parsed JSON/YAML data) if it nests at most :data:`MAX_DEPTH` levels and holds at most
    ``TRACKEVAL_MAX_ELEMENTS`` values; an explicit stack (no recursion), each container once (shared YAML
    aliases count once). ``budget``: a one-element list holding the elements still allowed, shared by the lines
    of one JSON Lines file.

    Raises:
        InputError: naming ``file`` (and ``line``) and the limit.
    """
    left = budget if budget is not None else [max_elements()]
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        left[0] -= 1
        if left[0] < 0:
            raise LimitError(
                f"more than {max_elements()} values{_where(line)} ({MAX_ELEMENTS_ENV})", file=str(file), field="size"
            )
        if isinstance(node, dict | list):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if depth > MAX_DEPTH:
                raise LimitError(f"nested deeper than {MAX_DEPTH} levels{_where(line)}", file=str(file), field="depth")
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return obj


def parse_json(text: str, *, file: Path | str, line: int | None = None, budget: list[int] | None = None) -> Any:
    """The data of JSON ``text`` of ``file``, bounded by :func:`check_tree`.

    Raises:
        InputError: malformed JSON (its line and column), nesting or size beyond the limits.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if line is None:
            detail = f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        else:
            detail = f"malformed JSON on line {line}: {exc.msg} at column {exc.colno}"
        raise InputError(detail, file=str(file)) from exc
    except RecursionError:  # the decoder recurses per nesting level
        detail = f"nested deeper than {MAX_DEPTH} levels{_where(line)}"
        raise LimitError(detail, file=str(file), field="depth") from None
    return check_tree(data, file=file, line=line, budget=budget)


def read_json(path: Path) -> Any:
    """The data of a bounded JSON file (UTF-8, a BOM tolerated, not empty)."""
    return parse_json(read_text_limited(path), file=path)


def parse_jsonl(text: str, *, file: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of JSON Lines text; each line must be a JSON object,
    and the lines together hold at most ``TRACKEVAL_MAX_ELEMENTS`` values.

    Lines end at ``"\\n"`` only (a trailing ``"\\r"`` is dropped): not :meth:`str.splitlines`, which also breaks
    at U+2028, U+0085 and other characters that JSON allows unescaped inside strings. Blank lines (JSON
    whitespace only) are skipped; the numbers count every physical line from 1.
    """
    out = []
    budget = [max_elements()]
    for line_no, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip(JSON_WHITESPACE):
            continue
        obj = parse_json(line, file=file, line=line_no, budget=budget)
        if not isinstance(obj, dict):
            what = _JSON_TYPE.get(type(obj), "null")
            raise InputError(f"line {line_no} is not a JSON object (it is {what})", file=str(file))
        out.append((line_no, obj))
    return out


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """:func:`parse_jsonl` of a bounded, non-empty UTF-8 file."""
    return parse_jsonl(read_text_limited(path), file=path)


def read_yaml(path: Path) -> Any:
    """The data of a bounded YAML file: safe loading (plain data, no tags that build objects), a repeated key
    refused, nesting and the count of nodes (each alias once, before anything is built) bounded.

    Raises:
        InputError: naming the file and the line of a YAML error, a repeated key (both lines), a limit.
    """
    text = decode_text(read_limited(path), file=path)
    try:
        return _load_yaml(text, where=str(path), max_depth=MAX_DEPTH, max_nodes=max_elements())
    except ConfigError as exc:
        raise InputError(str(exc).removeprefix(f"{path}: "), file=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" on line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"malformed YAML{at}: {problem}", file=str(path)) from None


def read_xml(path: Path) -> ET.Element:
    """The root element of a bounded XML file, parsed incrementally with its depth and element count checked
    as it goes (Python's expat refuses entity-expansion bombs; external entities are never fetched).

    Raises:
        InputError: malformed XML (its line), nesting or elements beyond the limits.
    """
    raw = read_limited(path)
    parser = ET.XMLPullParser(events=("start", "end"))
    depth, count, limit, root = 0, 0, max_elements(), None
    stream = io.BytesIO(raw)
    try:
        while chunk := stream.read(1 << 16):
            parser.feed(chunk)
            for event, element in parser.read_events():
                if event == "end":
                    depth -= 1
                    root = element
                    continue
                depth, count = depth + 1, count + 1
                if depth > MAX_DEPTH:
                    raise LimitError(f"nested deeper than {MAX_DEPTH} levels", file=str(path), field="depth")
                if count > limit:
                    raise LimitError(f"more than {limit} elements ({MAX_ELEMENTS_ENV})", file=str(path), field="size")
        parser.close()
    except ET.ParseError as exc:
        raise InputError(f"malformed XML: {exc}", file=str(path)) from None
    if root is None:
        raise InputError("malformed XML: no element found", file=str(path))
    return root
