"""Reading input files with located errors: bytes and UTF-8 text.

Every failure is an :class:`~trackeval.errors.InputError` naming the file (and the case when the caller passes
one). Structured files (JSON, JSON Lines, YAML, XML, CSV) are read through the bounded loader of
:mod:`trackeval.io.structured`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from trackeval.errors import InputError

#: JSON's insignificant whitespace (RFC 8259): what may surround a value on a JSON Lines line.
JSON_WHITESPACE = " \t\n\r"


@contextlib.contextmanager
def open_regular(path: Path, *, case_id: str | None = None, follow_symlinks: bool = True) -> Iterator[BinaryIO]:
    """``path`` opened for binary reading, only if it is a regular file.

    The file is opened non-blocking (a FIFO cannot hang the open) and checked with ``fstat`` on the opened
    descriptor, so a swap between check and read cannot redirect it. ``follow_symlinks=False`` adds
    ``O_NOFOLLOW``: a symbolic link (to anything, a loop included) is refused, never followed.

    Raises:
        InputError: naming the file (and ``case_id``) when it is missing, a symbolic link (when not followed),
            a folder, FIFO or device, or cannot be opened (a symlink loop, permissions).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    where = {"file": str(path), "case_id": case_id}
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:
        raise InputError("file not found", **where) from exc
    except OSError as exc:
        if not follow_symlinks and path.is_symlink():
            raise InputError("is a symbolic link: refused, never followed", **where) from exc
        raise InputError(f"cannot read file: {exc.strerror or exc}", **where) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError("not a regular file: refused", **where)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def read_open(
    f: BinaryIO, path: Path, *, case_id: str | None = None, max_bytes: int | None = None, size: int = -1
) -> bytes:
    """``size`` bytes (``-1``: the rest) of an :func:`open_regular` file. A file of more than ``max_bytes`` in all
    (``None``: no limit) is an :class:`InputError` raised before the excess is read (its size is checked, then at
    most one byte more than the limit is read, in case it grows)."""
    where = {"file": str(path), "case_id": case_id}
    try:
        total = os.fstat(f.fileno()).st_size
        if max_bytes is not None and total > max_bytes:
            raise InputError(f"file is {total} bytes, more than the {max_bytes} bytes allowed for it", **where)
        want = [n for n in (size, -1 if max_bytes is None else max_bytes - f.tell() + 1) if n >= 0]
        data = _read_upto(f, min(want)) if want else f.read()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", **where) from exc
    if max_bytes is not None and f.tell() > max_bytes:
        raise InputError(f"file grew beyond the {max_bytes} bytes allowed for it", **where)
    return data


def _read_upto(f: BinaryIO, n: int) -> bytes:
    """Up to ``n`` bytes, read in chunks (``f.read(n)`` would allocate ``n`` bytes up front)."""
    parts = []
    while n > 0 and (chunk := f.read(min(n, 1 << 24))):
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def read_bytes(path: Path, *, case_id: str | None = None, max_bytes: int | None = None) -> bytes:
    """Bytes of a regular file (symbolic links followed: data folders may be DVC or git-annex links).

    Raises:
        InputError: naming the file (and ``case_id``) when it is missing, not a regular file, unreadable, or
            larger than ``max_bytes``.
    """
    with open_regular(path, case_id=case_id) as f:
        return read_open(f, path, case_id=case_id, max_bytes=max_bytes)


def read_regular_file(path: Path, *, case_id: str | None = None) -> bytes:
    """Bytes of ``path`` only if it is a regular file that is not a symbolic link (never followed).

    Used for evidence that is uploaded or trusted (a results folder's files). Raises :class:`InputError` naming
    the file for a symlink, a folder, a FIFO/device, or a missing/unreadable file.
    """
    with open_regular(path, case_id=case_id, follow_symlinks=False) as f:
        return read_open(f, path, case_id=case_id)


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
