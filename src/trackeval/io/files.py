"""Reading input files with located errors: bytes, UTF-8 text, JSON and JSON Lines.

Every failure is an :class:`~trackeval.errors.InputError` naming the file (and the case when the caller passes
one; the line for JSON Lines).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from trackeval.errors import InputError

#: JSON's insignificant whitespace (RFC 8259): what may surround a value on a JSON Lines line.
JSON_WHITESPACE = " \t\n\r"
_JSON_TYPE = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def read_bytes(path: Path, *, case_id: str | None = None) -> bytes:
    """File bytes; :class:`InputError` naming the file (and ``case_id``) when it is missing or unreadable."""
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(path), case_id=case_id) from exc
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", file=str(path), case_id=case_id) from exc


def read_regular_file(path: Path, *, case_id: str | None = None) -> bytes:
    """Bytes of ``path`` only if it is a regular file that is not a symbolic link (the link is never followed:
    ``O_NOFOLLOW``, then ``fstat`` on the opened descriptor, so a swap between check and read cannot redirect it).

    Used for evidence that is uploaded or trusted (a results folder's files). Raises :class:`InputError` naming
    the file for a symlink, a folder, a FIFO/device, or a missing/unreadable file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(path), case_id=case_id) from exc
    except OSError as exc:
        if path.is_symlink():
            raise InputError("is a symbolic link: refused, never followed", file=str(path), case_id=case_id) from exc
        raise InputError(f"cannot read file: {exc.strerror or exc}", file=str(path), case_id=case_id) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError("not a regular file: refused", file=str(path), case_id=case_id)
        chunks = []
        while chunk := os.read(fd, 1 << 24):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode_text(raw: bytes, *, file: Path) -> str:
    """``raw`` as UTF-8 text (a BOM is dropped); :class:`InputError` naming ``file`` and the bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(file)) from exc


def read_text(path: Path) -> str:
    """UTF-8 text (BOM tolerated) of a non-empty file, else :class:`InputError`."""
    text = decode_text(read_bytes(path), file=path)
    if not text.strip():
        raise InputError("file is empty", file=str(path))
    return text


def read_json(path: Path) -> Any:
    """Parse a JSON file; malformed JSON is an :class:`InputError` with its line and column."""
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", file=str(path)) from exc


def parse_jsonl(text: str, *, file: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of JSON Lines text; each line must be a JSON object.

    Lines end at ``"\\n"`` only (a trailing ``"\\r"`` is dropped): not :meth:`str.splitlines`, which also breaks
    at U+2028, U+0085 and other characters that JSON allows unescaped inside strings. Blank lines (JSON
    whitespace only) are skipped; the numbers count every physical line from 1.
    """
    out = []
    for line_no, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip(JSON_WHITESPACE):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"malformed JSON on line {line_no}: {exc.msg} at column {exc.colno}", file=str(file)
            ) from exc
        if not isinstance(obj, dict):
            what = _JSON_TYPE.get(type(obj), "null")
            raise InputError(f"line {line_no} is not a JSON object (it is {what})", file=str(file))
        out.append((line_no, obj))
    return out


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """:func:`parse_jsonl` of a non-empty UTF-8 file (see :func:`read_text`)."""
    return parse_jsonl(read_text(path), file=path)
