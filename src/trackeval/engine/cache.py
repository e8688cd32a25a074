"""Per-case result cache: a re-run after a crash, or after adding cases, computes only what is missing.

An entry is evidence like any input file, and is used only for the exact computation that produced it:

* **Keyed** (:meth:`CaseCache.key`) by the case's identity (the record fields it fixes: case id, subject,
  groups), the sha256 digests of its input files (truth, prediction), the sha256 of the unit's metric
  configuration and the identity of the scoring code (:func:`code_identity`: trackeval's ``__version__``, a
  sha256 over the source of every module of the installed ``trackeval`` package, and the numpy and scipy
  versions). The entry lives at ``<root>/<namespace>/<key[:2]>/<key>.json``.
* **Self-describing**: it stores its key and the material the key was made of, and each is compared on read
  with the computation asking for it (a copied, renamed or stale entry says which case, inputs, config or code
  it belongs to).
* **Self-verifying**: it stores the sha256 of its record, checked on read, and the record is validated
  (:class:`~trackeval.results.CaseRecord`) and must name the case it is keyed for.
* **Written atomically** (:func:`trackeval.io.atomic.atomic_path`): a process killed mid-write leaves no half
  entry. Entries are JSON, never pickles: a cache folder may be shared.

Anything else (a tampered, truncated, foreign, stale or invalid entry, a symlink or FIFO in its place, an
unusable cache folder) is a miss: the case is recomputed and the entry rewritten, with one warning naming the
cache file (:attr:`Lookup.warning`, which a pool worker sends back to the calling process with its result, where
:func:`log_cache_warnings` logs each distinct one once). A cache problem is never fatal and never trusted.

The record digest detects corruption and edits; it is not a signature: whoever can write the cache folder can
forge an entry with a matching digest (and could as well edit the results), so keep a shared cache writable by
trusted users only.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import logging
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from trackeval._version import __version__
from trackeval.io.atomic import atomic_path
from trackeval.results import CaseRecord

log = logging.getLogger(__name__)

#: the entry layout; an entry of another format is a miss
ENTRY_FORMAT = 2
#: the largest entry read (a case record is a few KiB; anything bigger is not one of ours)
MAX_ENTRY_BYTES = 16 * 2**20
#: the libraries whose arithmetic the per-case numbers rest on, part of :func:`code_identity`
NUMERIC_LIBRARIES = ("numpy", "scipy")
#: the parts of the ``trackeval`` package per-case scoring can run: ``benchmarks`` and what the import-layer rules
#: (tests/test_units.py) let it import; ``gate``, ``report``, ``tracking`` and the command layers cannot change a
#: per-case number, so editing them keeps the cache
SCORING_CODE = (
    "__init__.py",
    "_version.py",
    "errors.py",
    "results.py",
    "case_table.py",
    "spec.py",
    "registry.py",
    "config",
    "metrics",
    "io",
    "stats",
    "engine",
    "audit",
    "benchmarks",
)


def _canonical(value: Any) -> bytes:
    """The JSON bytes digests are taken over (sorted keys, no whitespace, no NaN)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def code_identity() -> str:
    """The identity of the scoring code: ``trackeval <version>+src.<sha256[:16]> numpy <v> scipy <v>``.

    The digest is taken over the relative path and bytes of every ``*.py`` file of :data:`SCORING_CODE` in the
    installed (or editable) ``trackeval`` package, so an edit to a module scoring can run, released or not,
    changes the key of every entry. Computed once per process (a few hundredths of a second) by the process that
    builds the cache; workers receive it with the cache.
    """
    package = Path(__file__).resolve().parents[1]  # the trackeval package folder
    files = [package / name for name in SCORING_CODE if name.endswith(".py")]
    files += [f for name in SCORING_CODE if not name.endswith(".py") for f in (package / name).rglob("*.py")]
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.relative_to(package).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    libraries = []
    for name in NUMERIC_LIBRARIES:
        try:
            libraries.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            libraries.append(f"{name} absent")
    return " ".join([f"trackeval {__version__}+src.{h.hexdigest()[:16]}", *libraries])


@dataclass(frozen=True)
class CacheKey:
    """The key of one case's entry: ``digest`` (the file name) and the ``material`` it is the sha256 of."""

    digest: str
    material: dict[str, Any]


@dataclass(frozen=True)
class Lookup:
    """What :meth:`CaseCache.get` found: the verified ``record`` (None: a miss) and, when an entry was there but
    could not be used, the ``warning`` that names it (None for a hit or a plain miss)."""

    record: CaseRecord | None
    warning: str | None = None


class _Unusable(Exception):
    """An entry that is not evidence for the case asked for: the reason, for the warning."""


@dataclass(frozen=True)
class CaseCache:
    """A folder of ``<namespace>/<key[:2]>/<key>.json`` entries; ``root=None`` disables caching.

    ``code`` is the scoring code's identity (:func:`code_identity`, computed on construction when caching is
    on; a plug-in unit outside the package passes its own version with it); the cache object is small and
    picklable, so a unit passes it to its pool workers with each case.
    """

    root: Path | None
    namespace: str
    code: str = field(default="")

    def __post_init__(self) -> None:
        if self.root is not None and not self.code:
            object.__setattr__(self, "code", code_identity())

    def key(self, case: Mapping[str, Any], inputs: Mapping[str, str], config: str) -> CacheKey:
        """The key of one case.

        Args:
            case: the case's identity, as the record fields it fixes (``{"case_id": ..., "subject_id": ...,
                "groups": {...}}``); a record read back must hold exactly these values.
            inputs: ``{role: sha256}`` of the case's input files (``"missing"`` for an absent one).
            config: the unit's metric configuration as text (e.g. ``model_dump_json()`` of its section).
        """
        material = {
            "format": ENTRY_FORMAT,
            "namespace": self.namespace,
            "code": self.code,
            "case": json.loads(_canonical(dict(case))),
            "inputs": dict(sorted(inputs.items())),
            "config_sha256": _sha256(config.encode()),
        }
        return CacheKey(_sha256(_canonical(material)), material)

    def path(self, key: CacheKey) -> Path:
        """Where ``key``'s entry lives."""
        assert self.root is not None
        return self.root / self.namespace / key.digest[:2] / f"{key.digest}.json"

    def get(self, key: CacheKey) -> Lookup:
        """The verified record of ``key``, or a miss (with a warning when an entry was there but is unusable).

        Never raises: whatever the entry holds, the worst outcome is a recomputation.
        """
        if self.root is None:
            return Lookup(None)
        path = self.path(key)
        try:
            raw = _read_entry(path)
        except FileNotFoundError:
            return Lookup(None)
        except NotADirectoryError as exc:  # the cache folder (or a level of it) is a file
            return Lookup(None, self._folder_warning(exc))
        except (OSError, _Unusable) as exc:
            return Lookup(None, self._entry_warning(path, _reason(exc)))
        try:
            return Lookup(self._verify(raw, key))
        except Exception as exc:  # noqa: BLE001  (a cache entry may hold anything: it is a miss, never fatal)
            return Lookup(None, self._entry_warning(path, _reason(exc)))

    def put(self, key: CacheKey, record: CaseRecord, after: Lookup | None = None) -> tuple[str, ...]:
        """Store ``record`` under ``key`` (atomically); returns the warnings to report for this case: the one of
        the lookup ``after`` which the record was computed (if any) and a failure to write (which only costs a
        recomputation later), folded into one when both concern the same entry."""
        earlier = () if after is None or after.warning is None else (after.warning,)
        if self.root is None:
            return earlier
        body = record.model_dump(mode="json")
        try:
            entry = {**key.material, "key": key.digest, "record": body, "record_sha256": _sha256(_canonical(body))}
        except ValueError:  # a value JSON cannot hold (inf): the case is simply not cached
            log.debug("case %s not cached: its record is not JSON-serialisable", record.case_id)
            return earlier
        try:
            with atomic_path(self.path(key)) as tmp:
                tmp.write_text(json.dumps(entry, allow_nan=False), encoding="utf-8")
        except OSError as exc:
            if earlier and str(self.path(key)) in earlier[0]:
                return (f"{earlier[0]}, but the entry could not be replaced ({_strerror(exc)})",)
            return (*earlier, self._folder_warning(exc))
        return earlier

    def _verify(self, raw: bytes, key: CacheKey) -> CaseRecord:
        """The record of entry bytes ``raw`` if the entry is evidence for ``key``; raises :class:`_Unusable`.

        Checked in order: the entry's layout, the key material it was made of, the key it names, its record's
        digest, the record itself (pydantic's ValidationError propagates) and the case the record names.
        """
        entry = _parse_entry(raw)
        _check_material(entry, key.material)
        if entry["key"] != key.digest:
            raise _Unusable(f"it names key {_short(entry['key'])}, not its own (a copied or renamed entry)")
        body = entry["record"]
        if entry["record_sha256"] != _sha256(_canonical(body)):
            raise _Unusable("its record does not match its digest (edited or corrupted)")
        record = CaseRecord.model_validate(body)
        for name, value in key.material["case"].items():
            if getattr(record, name) != value:
                raise _Unusable(f"its record is for another case: {name} is {_short(getattr(record, name))}")
        return record

    def _entry_warning(self, path: Path, reason: str) -> str:
        return f"ignored case cache entry {path}: {reason}; the case was recomputed"

    def _folder_warning(self, exc: OSError) -> str:
        return f"case cache {self.root} not usable ({_strerror(exc)}); cases were computed and not cached"


#: the key material an entry must share with the computation asking for it, in the order checked, and what a
#: difference means
_MATERIAL_CHECKS = (
    ("namespace", "of another unit"),
    ("case", "for another case (a copied or renamed entry)"),
    ("code", "written by another version of the scoring code (stale)"),
    ("config_sha256", "for another configuration"),
    ("inputs", "for other input files"),
)


def _parse_entry(raw: bytes) -> dict[str, Any]:
    """The JSON object of entry bytes ``raw``, with the fields of an entry of :data:`ENTRY_FORMAT` (``key``,
    ``record``, ``record_sha256``); raises :class:`_Unusable` for text that is not UTF-8, not JSON, not an object
    or not of this format."""
    try:
        entry = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _Unusable("not UTF-8 text") from exc
    except ValueError as exc:
        raise _Unusable(f"not JSON (truncated or overwritten?): {exc}") from exc
    if not isinstance(entry, dict):
        raise _Unusable(f"not a cache entry (a JSON {type(entry).__name__})")
    if entry.get("format") != ENTRY_FORMAT or not {"key", "record", "record_sha256"} <= entry.keys():
        raise _Unusable(f"not a cache entry of format {ENTRY_FORMAT} (an older trackeval, or another file)")
    return entry


def _check_material(entry: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """Raise :class:`_Unusable` at the first of :data:`_MATERIAL_CHECKS` where ``entry`` differs from the key
    material ``expected``, naming the field (for a mapping, the first of its keys, in sorted order, that
    differs) and both values."""
    for name, what in _MATERIAL_CHECKS:
        stored, wanted = entry.get(name), expected[name]
        if stored != wanted:
            if isinstance(stored, dict) and isinstance(wanted, dict):  # name the first field that differs
                sub = next(k for k in sorted(stored.keys() | wanted.keys()) if stored.get(k) != wanted.get(k))
                name, stored, wanted = f"{name}.{sub}", stored.get(sub), wanted.get(sub)
            raise _Unusable(f"{what}: {name} is {_short(stored)}, expected {_short(wanted)}")


def _read_entry(path: Path) -> bytes:
    """The bytes of the regular file at ``path`` (never following a symlink, never blocking on a FIFO)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise _Unusable("not a regular file (a symbolic link)") from exc
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _Unusable(f"not a regular file ({_kind(mode)})")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ENTRY_BYTES:
                raise _Unusable(f"larger than {MAX_ENTRY_BYTES} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a device"


def _strerror(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _reason(exc: BaseException) -> str:
    if isinstance(exc, _Unusable):
        return str(exc)
    if isinstance(exc, OSError):
        return f"unreadable ({_strerror(exc)})"
    if type(exc).__name__ == "ValidationError":  # pydantic: the first field that is wrong
        first = exc.errors()[0]  # type: ignore[attr-defined]
        where = ".".join(str(p) for p in first["loc"])
        return f"not a valid case record ({where}: {first['msg']})"
    return f"not usable ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return repr(text if len(text) <= 80 else text[:77] + "...")


def log_cache_warnings(warnings: Iterable[Iterable[str]]) -> None:
    """Log each distinct cache warning once, in order (``warnings``: one group per case, from its workers)."""
    seen: set[str] = set()
    for group in warnings:
        for warning in group:
            if warning not in seen:
                seen.add(warning)
                log.warning(warning)
