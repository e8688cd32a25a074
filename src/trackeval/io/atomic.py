"""Atomic writes: a reader never sees a truncated file, and a set of files changes all together or not at all.

:func:`atomic_path` replaces one file. :func:`write_file_set` replaces several files of one folder as a set
(the results folder's results.json, metrics.json and cases.parquet):

1. every file is written into a fresh staging folder inside the target folder (same file system, so a rename
   is atomic) and fsync'ed;
2. each existing target gets a hard link (a copy where links are not supported) in the staging folder, so the
   previous version survives its replacement;
3. the files are renamed over their targets in the given order, then the folder is fsync'ed;
4. on any failure (an exception or ``KeyboardInterrupt`` at any step) the renamed targets are put back from
   their backups, or removed where there was no previous file: the previous set is left as it was, or nothing.

:func:`write_files` does the same for files in several folders (``trackeval init``: params.yaml, dvc.yaml,
.gitignore, .github/workflows/..., .dvc/plots/...): each file is staged as a hidden temporary beside its target
(so each rename stays on one file system), each existing target is backed up by a hard link beside it, the
renames follow, and a failure at any step puts every renamed target back and removes the folders it created.
An existing file's mode can be kept (``modes``).

Every file either function writes gets mode ``0o666`` less the process umask, as a plain ``open()`` would
(0644 under the usual umask 022), so outputs are as readable as any other file the user writes.

The staging folder is removed in every case but a killed process (a hidden ``.trackeval-staging-*`` folder is
then left, and the set may be mixed: readers of a set must detect that; the results folder does, see
:mod:`trackeval.io.results_folder`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

#: prefix of the staging folder :func:`write_file_set` creates inside the target folder
STAGING_PREFIX = ".trackeval-staging-"
#: how many random names :func:`atomic_path` tries before giving up (``tempfile``'s ``TMP_MAX`` is of this order)
_TEMP_NAME_TRIES = 100


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it onto ``target`` only if the block succeeds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = _new_temp_file(target)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


def _new_temp_file(target: Path) -> Path:
    """Create an empty, uniquely named hidden file beside ``target`` with mode ``0o666`` less the process umask
    (what a plain ``open()`` gives: 0644 under the usual umask 022), never ``tempfile.mkstemp``'s 0600, so the
    renamed output is as readable as any other file the user writes."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(_TEMP_NAME_TRIES):
        path = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(path, flags, 0o666))
        except FileExistsError:
            continue
        return path
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(target.parent))


def fsync_path(path: Path) -> None:
    """Flush a file's (or a folder's entries') data to stable storage; a folder that cannot be opened for
    fsync on this platform (``EINVAL``/``EISDIR`` on some file systems) is skipped, other errors raise."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if not path.is_dir() or exc.errno not in (errno.EINVAL, errno.EISDIR):
            raise
    finally:
        os.close(fd)


def write_file_set(folder: Path, contents: Mapping[str, bytes]) -> dict[str, Path]:
    """Write ``{file name: bytes}`` into ``folder`` as one set (see the module docstring); returns the paths.

    Names are plain file names (no separators). Files of ``folder`` outside the set are left untouched.

    Raises:
        OSError: from any step; the previous set is then intact (or absent, if there was none).
    """
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=folder))
    try:
        new = {name: staging / name for name in contents}
        for name, data in contents.items():
            _write_durable(new[name], data)
        backups = {name: _backup(folder / name, staging / f"{name}.previous") for name in contents}
        _switch(folder, new, backups)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {name: folder / name for name in contents}


def write_files(contents: Mapping[Path, bytes], *, modes: Mapping[Path, int] | None = None) -> None:
    """Write ``{path: bytes}`` (files in any folders) as one set: all replaced, or none (module docstring).

    Args:
        contents: the files and their new bytes; missing folders are created (and removed again on failure).
        modes: permission bits for some of the files (an existing file's, to keep it); the others get ``0o666``
            less the umask.

    Raises:
        OSError: from any step; every target is then as it was, and no folder this call created is left.
    """
    created: list[Path] = []
    temps: dict[Path, Path] = {}
    backups: dict[Path, Path | None] = {}
    done: list[Path] = []
    try:
        for target, data in contents.items():
            _make_folders(target.parent, created)
            temps[target] = _new_temp_file(target)
            _write_durable(temps[target], data)
            if modes and target in modes:
                os.chmod(temps[target], modes[target])
        for target in contents:
            backups[target] = _backup_beside(target)
        for target, tmp in temps.items():
            os.replace(tmp, target)
            done.append(target)
        for folder in dict.fromkeys(t.parent for t in contents):
            fsync_path(folder)
    except BaseException:
        _undo(done, backups)
        _remove([*temps.values(), *(b for b in backups.values() if b is not None)], created)
        raise
    _remove([*temps.values(), *(b for b in backups.values() if b is not None)], [])


def _make_folders(folder: Path, created: list[Path]) -> None:
    """Create ``folder`` and its missing parents, outermost first, appending each to ``created`` as it is made."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
        created.append(path)


def _remove(files: list[Path], folders: list[Path]) -> None:
    """Remove leftover temporaries and backups, then the (now empty) ``folders``, innermost first."""
    for path in files:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
    for folder in reversed(folders):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _backup_beside(target: Path) -> Path | None:
    """A hard link (else a copy) of ``target`` under a fresh hidden name beside it; ``None`` when it is absent."""
    if not target.exists() and not target.is_symlink():
        return None
    backup = _new_temp_file(target)
    backup.unlink()
    return _backup(target, backup)


def _undo(done: list[Path], backups: dict[Path, Path | None]) -> None:
    """Put the renamed targets back from their backups (or remove the ones that are new)."""
    for target in reversed(done):
        backup = backups.get(target)
        with contextlib.suppress(OSError):
            if backup is None:
                target.unlink()
            else:
                os.replace(backup, target)


def _write_durable(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _backup(target: Path, backup: Path) -> Path | None:
    """A hard link (else a copy) of ``target`` at ``backup``; ``None`` when there is no ``target``."""
    if not target.exists() and not target.is_symlink():
        return None
    try:
        os.link(target, backup, follow_symlinks=False)
    except OSError:
        shutil.copy2(target, backup, follow_symlinks=False)
    return backup


def _switch(folder: Path, new: dict[str, Path], backups: dict[str, Path | None]) -> None:
    """Rename every new file over its target, then fsync the folder; undo every rename on failure."""
    done: list[str] = []
    try:
        for name, path in new.items():
            os.replace(path, folder / name)
            done.append(name)
        fsync_path(folder)
    except BaseException:
        for name in reversed(done):
            backup = backups[name]
            with contextlib.suppress(OSError):
                if backup is None:
                    (folder / name).unlink()
                else:
                    os.replace(backup, folder / name)
        with contextlib.suppress(OSError):
            fsync_path(folder)
        raise
