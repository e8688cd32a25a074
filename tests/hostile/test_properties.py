"""Property-based hostile inputs (hypothesis): random manifests, rankings, JSON Lines and NIfTI headers.

Each property: whatever the file holds, its reader returns a valid value or raises :class:`InputError` naming the
file (and the case where the reader knows it), never another exception and never a hang (:func:`_bounded`).
Where the text is well formed, the value is checked exactly: a CSV written by the ``csv`` module reads back as
written (quoted newlines, U+2028, U+0085 and a BOM included), JSON Lines read back object for object.

Examples are drawn at random on a developer's machine (failures are replayed first from .pytest_cache) and
derandomized, without an example database, in CI (``HYPOTHESIS_PROFILE=ci``, tests/conftest.py). The file runs in
well under 20 s.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import math
import signal
import struct
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

from tests.conftest import scaled
from trackeval.benchmarks.imis.logs import InteractionLog, read_log
from trackeval.benchmarks.mir3d.readers import RegionTruth, load_rankings
from trackeval.benchmarks.xray.report import _reports
from trackeval.benchmarks.xray.ret import read_rankings
from trackeval.errors import InputError
from trackeval.io.limits import max_voxels
from trackeval.io.nifti import LabelVolume, read_label_map
from trackeval.io.structured import parse_jsonl, read_jsonl
from trackeval.io.tables import read_csv_rows

#: examples per property: sized so that the whole file stays well under 20 s on one loaded core
SOME, MANY = 120, 200
#: the longest one reader call may take on a tiny file before it counts as a hang (seconds, before scaling)
HANG_S = 10.0


def examples(n: int) -> settings:
    """The settings of a property: ``n`` examples, no per-example deadline (:func:`_bounded` catches hangs); the
    rest (derandomize, database) from the profile loaded in tests/conftest.py."""
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------- the harness


class Hang(BaseException):
    """A reader was still running after its time bound (not an ``Exception``: a reader's ``except Exception``
    must not turn it into an InputError)."""


@contextlib.contextmanager
def _bounded(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the block after ``seconds`` (SIGALRM; a no-op outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum: int, frame: object) -> None:
        raise Hang(f"the reader was still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(read: Callable[[], Any], path: Path, case_id: str | None = None) -> Any:
    """``read()``'s value, or the :class:`InputError` it raised after checking that it names ``path`` (and
    ``case_id`` when given) on one line. Any other exception, or a hang, fails the property."""
    try:
        with _bounded(scaled(HANG_S)):
            value = read()
    except InputError as err:
        event("InputError")  # the share of refused inputs: --hypothesis-show-statistics
        assert err.file == str(path), (err.file, str(err))
        assert case_id is None or err.case_id == case_id, (err.case_id, str(err))
        assert "\n" not in str(err), str(err)
        return err
    event("a value")
    return value


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the module; each example overwrites its file (function-scoped fixtures are not reset
    between hypothesis examples)."""
    return tmp_path_factory.mktemp("properties")


# ---------------------------------------------------------------------------------------------- strategies

#: characters a careless or hostile table holds: CSV syntax, line breaks str.splitlines() also splits at, a BOM
NASTY = [*'",\n\r\u2028\u2029\u0085\x0b\x0c\x1c\ufeff \t\x00', "\r\n"]
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
cell = st.lists(st.one_of(st.sampled_from(NASTY), text), max_size=4).map("".join)
name = st.text(st.characters(exclude_categories=("Cs", "Cc", "Cf", "Zs", "Zl", "Zp")), min_size=1, max_size=6)
bom = st.sampled_from(["", "\ufeff"])


@st.composite
def csv_text(draw: st.DrawFn, rows: st.SearchStrategy[list[list[str]]]) -> str:
    """``rows`` written by the csv module with a random quoting style and line terminator, maybe after a BOM."""
    buf = io.StringIO()
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]))
    terminator = draw(st.sampled_from(["\r\n", "\n"]))
    csv.writer(buf, quoting=quoting, lineterminator=terminator).writerows(draw(rows))
    return draw(bom) + buf.getvalue()


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[list[str]]]:
    """A well-formed table: distinct header names and rows as wide as the header."""
    header = draw(
        st.lists(name, min_size=1, max_size=4, unique_by=str.strip).filter(lambda h: all(n.strip() for n in h))
    )
    rows = draw(st.lists(st.lists(cell, min_size=len(header), max_size=len(header)), min_size=1, max_size=5))
    return header, rows


ragged = st.lists(st.lists(cell, max_size=5), max_size=6)
#: raw text: CSV fragments, stray quotes and line breaks in any order
raw_text = st.lists(st.one_of(st.sampled_from(NASTY), text, st.just("case_id,subject_id\n")), max_size=20).map("".join)


@st.composite
def encoded(draw: st.DrawFn, text_: st.SearchStrategy[str]) -> bytes:
    """UTF-8 bytes of ``text_``; sometimes latin-1 instead, or the last byte cut (mid-character: not UTF-8)."""
    value = draw(text_)
    how = draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "latin-1", "cut"]))
    if how == "latin-1":
        return value.encode("latin-1", "replace")
    return value.encode()[:-1] if how == "cut" else value.encode()


json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), text, cell
)
json_value = st.recursive(
    json_scalar, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(text, kids, max_size=3)
)
json_object = st.dictionaries(st.one_of(text, cell), json_value, max_size=4)


def jsonl_line(obj: Any) -> str:
    """One JSON Lines line as a careless writer produces it: non-ASCII unescaped (U+2028, U+0085 stay raw)."""
    return json.dumps(obj, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------- CSV manifests


@examples(MANY)
@given(raw=encoded(st.one_of(csv_text(ragged), raw_text)), required=st.lists(name, max_size=2))
def test_csv_reader_returns_rows_or_names_the_file(work: Path, raw: bytes, required: list[str]) -> None:
    path = work / "manifest.csv"
    path.write_bytes(raw)
    rows = outcome(lambda: read_csv_rows(path, tuple(required)), path)
    if not isinstance(rows, InputError):
        assert rows and all(isinstance(r, dict) and set(required) <= set(r) for r in rows)
        assert len({tuple(r) for r in rows}) == 1  # every row has the header's columns, in the header's order
        assert all(isinstance(v, str) and v == v.strip() for r in rows for v in r.values())


@examples(MANY)
@given(table=tables(), data=st.data())
def test_csv_written_by_the_csv_module_reads_back_as_written(
    work: Path, table: tuple[list[str], list[list[str]]], data: st.DataObject
) -> None:
    """Quoted fields may hold newlines, U+2028, U+0085, quotes and commas: the csv module parses the real text."""
    header, rows = table
    written = data.draw(csv_text(st.just([header, *rows])))
    reparsed = list(csv.reader(io.StringIO(written.removeprefix("\ufeff"), newline="")))
    assume(reparsed == [header, *rows])  # what the csv module itself reads back (QUOTE_NONNUMERIC quirks aside)
    expected = [dict(zip([h.strip() for h in header], [c.strip() for c in r], strict=True)) for r in rows]
    expected = [r for r in expected if any(r.values())]  # rows of blank cells are skipped
    path = work / "manifest.csv"
    path.write_text(written, encoding="utf-8", newline="")
    got = outcome(lambda: read_csv_rows(path, ()), path)
    if expected:
        assert got == expected
    else:
        assert isinstance(got, InputError) and "no data rows" in got.message


# ------------------------------------------------------------------------------------------------- rankings

MIR_TRUTH = {
    "chest": RegionTruth(
        region="chest",
        index=("a", "b", "c", "d"),
        queries=("q1", "q2"),
        labels={"flag": dict.fromkeys("abcd", 0) | {"q1": 1, "q2": 0}, "group": dict.fromkeys("abcd", 1)},
        overlap=(),
        files=(),
    )
}
KNOWN_REGIONS = {"chest", "abdomen"}  # rows of abdomen (known, not evaluated) are skipped and counted
#: hostile values per field (the valid ones are drawn in :func:`ranking_rows`)
HOSTILE = {
    "region": st.sampled_from(["Chest", "chest ", "", "lung"]) | text,
    "query": st.sampled_from(["q3", "a", "", "q1\u2028"]) | text,
    "rank": st.integers(-2, 6).map(str)
    | st.sampled_from(["1.0", " 2 ", "+3", "\u0663", "1e0", "", "0x1", "99999999999999999999"])
    | text,
    "retrieved": st.sampled_from(["a", "q1", "q2", "", "e"]) | text,
    "score": st.sampled_from(["0.5", "nan", "inf", "-1e309", "", "x"]) | text,
}


@st.composite
def ranking_rows(draw: st.DrawFn, regions: bool) -> list[dict[str, str]]:
    """Valid ranked lists (queries q1/q2 over the index a..d, ranks 1..n, rows shuffled; with ``regions``, maybe
    a skipped abdomen row), then up to two fields replaced by hostile values."""
    rows = []
    for query in draw(st.lists(st.sampled_from(["q1", "q2"]), unique=True, max_size=2)):
        items = draw(st.permutations("abcd"))[: draw(st.integers(1, 4))]
        rows += [{"query": query, "rank": str(r), "retrieved": item} for r, item in enumerate(items, start=1)]
    if regions:
        rows = [{"region": "chest", **row} for row in rows]
        rows += [{"region": "abdomen", "query": "x", "rank": "1", "retrieved": "y"}] * draw(st.integers(0, 1))
    rows = list(draw(st.permutations(rows)))
    if not rows:
        return rows
    edits = st.tuples(st.integers(0, len(rows) - 1), st.sampled_from([*rows[0], "score"]))
    for row, field in draw(st.lists(edits, max_size=2)):
        rows[row] = {**rows[row], field: draw(HOSTILE[field])}
    return rows


@st.composite
def rankings_file(draw: st.DrawFn, regions: bool) -> tuple[str, bytes]:
    """``(suffix, bytes)``: a rankings CSV (random quoting, BOM) or, with ``regions`` (3D-MIR), maybe JSONL with
    values of any JSON type."""
    rows = draw(ranking_rows(regions))
    if not regions or draw(st.booleans()):
        fields = [*(["region"] if regions else []), "query", "rank", "retrieved", "score"]
        return ".csv", draw(csv_text(st.just([fields, *[[r.get(f, "") for f in fields] for r in rows]]))).encode()
    lines = [{k: draw(st.just(v) | json_value) for k, v in r.items()} for r in rows]
    return ".jsonl", "\n".join(jsonl_line(obj) for obj in lines).encode()


@examples(MANY)
@given(file=rankings_file(regions=True))
@example(file=(".jsonl", b'{"region": "chest", "query": "q1", "rank": "1", "retrieved": null}'))  # found: KeyError
def test_mir3d_rankings_are_valid_lists_or_name_the_file(work: Path, file: tuple[str, bytes]) -> None:
    suffix, raw = file
    path = work / f"rankings{suffix}"
    path.write_bytes(raw)
    got = outcome(lambda: load_rankings(path, MIR_TRUTH, KNOWN_REGIONS), path)
    if isinstance(got, InputError):
        return
    lists, skipped = got
    assert skipped >= 0
    for (region, query), ranked in lists.items():
        assert region == "chest" and query in MIR_TRUTH["chest"].queries
        assert len(set(ranked.positions)) == len(ranked.positions)
        assert all(0 <= p < len(MIR_TRUTH["chest"].index) for p in ranked.positions)


@examples(SOME)
@given(file=rankings_file(regions=False))
def test_xray_ret_rankings_are_valid_lists_or_name_the_file(work: Path, file: tuple[str, bytes]) -> None:
    labels = dict.fromkeys(["a", "b", "c", "d", "q1", "q2"], "x")
    path = work / "ret_rankings.csv"
    path.write_bytes(file[1])
    got = outcome(lambda: read_rankings(path, labels), path)
    if not isinstance(got, InputError):
        for query, items in got.items():
            assert query in labels and query not in items
            assert len(set(items)) == len(items) and set(items) <= set(labels)


# ---------------------------------------------------------------------------------------------- JSON Lines

#: what separates the lines a careless writer produces: blank lines, CRLF, a trailing newline
separator = st.sampled_from(["\n", "\r\n", "\n\n", "\n \t\n"])


@examples(SOME)
@given(objects=st.lists(json_object, min_size=1, max_size=5), sep=separator, lead=bom, tail=st.sampled_from(["", "\n"]))
def test_jsonl_reads_back_object_for_object(work: Path, objects: list[dict], sep: str, lead: str, tail: str) -> None:
    """Lines end at "\\n" only: U+2028, U+0085, \\x1c... inside strings stay in their string."""
    path = work / "log.jsonl"
    path.write_bytes((lead + sep.join(jsonl_line(o) for o in objects) + tail).encode())
    got = outcome(lambda: read_jsonl(path), path)
    assert [obj for _, obj in got] == objects
    assert [n for n, _ in got] == [1 + i * sep.count("\n") for i in range(len(objects))]  # physical line numbers


#: a JSON Lines line as found in the wild: an object, another JSON value, a truncated object or stray text
hostile_line = st.one_of(
    json_object.map(jsonl_line), json_value.map(jsonl_line), json_object.map(lambda o: jsonl_line(o)[:-1]), cell
)


@examples(MANY)
@given(raw=encoded(st.lists(hostile_line, max_size=5).map("\n".join)))
def test_jsonl_parser_returns_objects_or_names_the_file(work: Path, raw: bytes) -> None:
    path = work / "any.jsonl"
    path.write_bytes(raw)
    got = outcome(lambda: read_jsonl(path), path)
    if not isinstance(got, InputError):
        assert all(isinstance(n, int) and n >= 1 and isinstance(o, dict) for n, o in got)
    text_ = raw.decode("utf-8", "replace")
    parsed = outcome(lambda: parse_jsonl(text_, file=path), path)
    assert isinstance(parsed, InputError) or all(isinstance(o, dict) for _, o in parsed)


LOG_LINE = {
    "case_id": "ct_s05",
    "target": "liver",
    "prompt_type": "point",
    "turn": 1,
    "seed": 42,
    "prompt": {"clicks": [{"coords": [101, 77], "label": 1}], "box": None, "text": None},
    "mask_path": "masks/ct_s05/liver/point_01.png",
}


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with some fields replaced by random JSON values (U+2028 etc. inside strings), dropped or added."""
    out = dict(base)
    nested = ["prompt.clicks"] if "prompt" in base else []
    for key in draw(st.lists(st.sampled_from([*base, "extra", *nested]), max_size=3)):
        action = draw(st.sampled_from(["replace", "drop"]))
        if key == "prompt.clicks":
            out["prompt"] = {**base["prompt"], "clicks": draw(json_value)}
        elif action == "drop":
            out.pop(key, None)
        else:
            out[key] = draw(json_value)
    return out


@examples(SOME)
@given(lines=st.lists(mutated(LOG_LINE), max_size=4), sep=separator)
def test_imis_interaction_log_is_valid_or_names_the_file(work: Path, lines: list[dict], sep: str) -> None:
    path = work / "interactions.jsonl"
    path.write_bytes(sep.join(jsonl_line(line) for line in lines).encode())
    got = outcome(lambda: read_log(path), path)
    if not isinstance(got, InputError):
        assert isinstance(got, InteractionLog) and got.by_case and isinstance(got.seed, int)
        assert all(isinstance(n, int) and line.turn >= 1 for ls in got.by_case.values() for n, line in ls)


@examples(SOME)
@given(
    lines=st.lists(mutated({"id": "img_1", "report": "No acute findings.\u2028Heart normal."}), max_size=4),
    allow_list=st.booleans(),
)
@example(lines=[{"id": "\n", "report": None}], allow_list=False)  # found: an error message of two lines
def test_xray_reports_are_texts_or_name_the_file(work: Path, lines: list[dict], allow_list: bool) -> None:
    path = work / "reports.jsonl"
    path.write_bytes("\n".join(jsonl_line(line) for line in lines).encode())
    got = outcome(lambda: _reports(path, allow_list=allow_list), path)
    if not isinstance(got, InputError):
        assert len(got) == len(lines)
        for line in lines:
            report = line["report"]
            assert got[str(line["id"])] == (report if isinstance(report, list) else [report])  # U+2028 kept


# ----------------------------------------------------------------------------------------------- NIfTI headers

#: a valid 4 x 3 x 2 uint8 label map (labels 0..5, sform = qform = diag(1.5, 1, 2)), the base every example edits
BASE_ARRAY = (np.arange(24, dtype=np.uint8) % 6).reshape(4, 3, 2)
BASE_NIFTI = nib.Nifti1Image(BASE_ARRAY, np.diag([1.5, 1.0, 2.0, 1.0])).to_bytes()
#: the NIfTI-1 header fields edited: name -> (byte offset, little-endian struct format)
FIELDS = {"dim": (40, "8h"), "datatype": (70, "h"), "bitpix": (72, "h"), "pixdim": (76, "8f"), "vox_offset": (108, "f")}
#: NIfTI datatype codes -> bytes per voxel as nibabel reads them (0 for codes without a fixed size: counted as 16)
CODES = {code: nib.nifti1.data_type_codes.dtype[code].itemsize for code in nib.nifti1.data_type_codes.value_set("code")}
#: voxel data a header may declare here (a shared test machine must not allocate more; §4 tests the size limit)
SAFE_BYTES = 64 << 20
#: what reading a small file may allocate besides 3 x the declared array (read chunks, zlib and nibabel buffers)
SLACK_BYTES = 20 << 20

int16 = st.integers(-(2**15), 2**15 - 1)
float32 = st.floats(width=32) | st.sampled_from([0.0, -1.0, 1e30, 1e-30])
small_dims = st.tuples(st.integers(-1, 8), *[st.integers(-1, 6)] * 3).map(lambda t: [*t, 1, 1, 1, 1])
header_edit = st.fixed_dictionaries(
    {},
    optional={
        "dim": small_dims
        | st.lists(st.integers(-2, 8), min_size=8, max_size=8)
        | st.lists(int16, min_size=8, max_size=8),
        "datatype": st.sampled_from(sorted(CODES)) | int16,
        "bitpix": st.sampled_from([0, 1, 8, 16, 24, 32, 64]) | int16,
        "pixdim": st.lists(float32, min_size=8, max_size=8),
        # offsets beyond SAFE_BYTES only where an allocation of that size fails at once (> 1e13: no touched pages)
        "vox_offset": st.sampled_from([0.0, 348.0, 352.0, 351.5, 353.0, 3e7, -352.0])
        | float32.filter(lambda v: not SAFE_BYTES < abs(v) < 1e13),
        # (offset, byte) patches anywhere in the 348-byte header: sizeof_hdr, magic, qform/sform codes...
        "bytes": st.lists(st.tuples(st.integers(0, 347), st.integers(0, 255)), min_size=1, max_size=3),
    },
)


def edited_nifti(edit: dict[str, Any]) -> bytes:
    """:data:`BASE_NIFTI` with the fields of ``edit`` (see :data:`header_edit`) written into its header."""
    raw = bytearray(BASE_NIFTI)
    for field, (offset, fmt) in FIELDS.items():
        if field in edit:
            values = edit[field] if isinstance(edit[field], list) else [edit[field]]
            struct.pack_into("<" + fmt, raw, offset, *values)
    for offset, byte in edit.get("bytes", []):
        raw[offset] = byte
    return bytes(raw)


def declared_bytes(raw: bytes) -> int:
    """Bytes of voxel data the header declares, the larger of both byte orders (nibabel guesses the order from
    dim[0]); 0 for a size the reader refuses before reading (more than ``max_voxels()``)."""
    declared = 0
    for order in "<>":
        ndim, *sizes = struct.unpack_from(order + "8h", raw, FIELDS["dim"][0])
        voxels = math.prod(abs(n) for n in sizes[: max(1, min(ndim, 7))])
        (code,) = struct.unpack_from(order + "h", raw, FIELDS["datatype"][0])
        if voxels <= max_voxels():
            declared = max(declared, voxels * (CODES.get(code) or 16))
    return declared


@examples(MANY)
@given(edit=header_edit, gz=st.booleans())
# found: OverflowError; MemoryError (NIfTI-2 magic); zero / infinite pixdim taken as the spacing (not the affine's);
# 30 MB allocated for a 24-voxel image whose vox_offset says 3e7
@example(edit={"vox_offset": 1e30}, gz=False)
@example(edit={"vox_offset": 1e30}, gz=True)
@example(edit={"vox_offset": 3e7}, gz=False)
@example(edit={"vox_offset": 3e7}, gz=True)
@example(edit={"pixdim": [0.0] * 8, "bytes": [(344, 0)]}, gz=False)
@example(edit={"pixdim": [0.0] * 8}, gz=False)
@example(edit={"pixdim": [0.0, 0.0, 0.0, math.inf, 0.0, 0.0, 0.0, 0.0]}, gz=True)
def test_nifti_header_gives_a_label_map_or_names_the_file(work: Path, edit: dict[str, Any], gz: bool) -> None:
    """...and allocates at most 3 x the array its header declares (§4), whatever the other fields say."""
    raw = edited_nifti(edit)
    declared = declared_bytes(raw)
    assume(declared <= SAFE_BYTES)
    path = work / ("label.nii.gz" if gz else "label.nii")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    tracemalloc.start()
    try:
        got = outcome(lambda: read_label_map(path, case_id="c1"), path, case_id="c1")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 3 * declared + SLACK_BYTES, f"{peak} bytes allocated for {declared} bytes declared"
    if isinstance(got, InputError):
        return
    assert isinstance(got, LabelVolume) and got.array.ndim in (2, 3)
    assert np.issubdtype(got.array.dtype, np.integer) and (got.array.size == 0 or got.array.min() >= 0)
    assert got.affine.shape == (4, 4) and np.isfinite(got.affine).all()
    assert len(got.spacing) == got.array.ndim
    # §4: the spacing comes from the affine; zero, negative, NaN, infinite or disagreeing pixdim is an error
    assert all(math.isfinite(z) and z > 0 for z in got.spacing), got.spacing
    assert np.allclose(got.spacing, np.linalg.norm(got.affine[:3, : got.array.ndim], axis=0)), (got.spacing, got.affine)
