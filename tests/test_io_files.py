"""The shared readers, digests and ranked-list validator of ``trackeval.io``."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from trackeval import results
from trackeval.errors import InputError
from trackeval.io.atomic import write_file_set
from trackeval.io.files import read_bytes, read_regular_file, read_text
from trackeval.io.hashing import sha256_bytes, sha256_files, sha256_stream, sha256_text
from trackeval.io.rankings import RankedLists
from trackeval.io.structured import parse_jsonl, read_json, read_jsonl

# ---------------------------------------------------------------- JSON Lines


def test_jsonl_keeps_line_separators_inside_strings(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 are legal unescaped in JSON strings: not line breaks for JSON Lines."""
    path = tmp_path / "r.jsonl"
    text = "a\u2028b\u2029c\x85d"
    path.write_bytes((json.dumps({"id": "r1", "report": text}, ensure_ascii=False) + "\n").encode())
    assert read_jsonl(path) == [(1, {"id": "r1", "report": text})]


def test_jsonl_crlf_bom_blank_lines_and_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": 1}\r\n\r\n  \t\r\n{"id": 2}')  # BOM, CRLF, blank lines, no final newline
    assert read_jsonl(path) == [(1, {"id": 1}), (4, {"id": 2})]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"id": 1}\n{"id": 2, "report": \n', "malformed JSON on line 2"),  # a ragged (truncated) line
        ('{"id": 1}\n{"id": 2}{"id": 3}\n', "malformed JSON on line 2: Extra data"),
        ('{"id": 1}\n\n[1, 2]\n', "line 3 is not a JSON object (it is an array)"),
        ('"text"\n', "line 1 is not a JSON object (it is a string)"),
        ('{"id": 1}\r{"id": 2}\n', "malformed JSON on line 1"),  # a lone CR does not end a line
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8", newline="")
    with pytest.raises(InputError) as err:
        read_jsonl(path)
    assert needle in str(err.value) and err.value.file == str(path)


def test_parse_jsonl_allows_empty_text() -> None:
    assert parse_jsonl("\n \n", file=Path("x.jsonl")) == []


def test_file_readers_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(InputError, match="file not found") as err:
        read_bytes(missing, case_id="c1")
    assert err.value.file == str(missing) and err.value.case_id == "c1"
    (tmp_path / "empty.txt").write_text(" \n")
    with pytest.raises(InputError, match="file is empty"):
        read_text(tmp_path / "empty.txt")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8 text"):
        read_text(tmp_path / "latin1.txt")
    (tmp_path / "bad.json").write_text('{"a": 1,\n "b": }')
    with pytest.raises(InputError, match="malformed JSON: .* at line 2 column 7"):
        read_json(tmp_path / "bad.json")


# ---------------------------------------------------------------- sha256


def test_digests_are_the_plain_sha256_of_the_same_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"one")
    b.write_bytes(b"two")
    assert sha256_files(a, b) == hashlib.sha256(b"onetwo").hexdigest() == sha256_bytes(b"one", b"two")
    assert sha256_stream(iter([b"one", b"two"])) == sha256_bytes(b"onetwo")
    assert sha256_text("x:1", "y:2") == hashlib.sha256(b"x:1\ny:2").hexdigest()
    assert sha256_text() == hashlib.sha256(b"").hexdigest()
    assert sha256_text is results.sha256_text  # one definition (results is a leaf: it cannot import io)
    with pytest.raises(InputError, match="file not found"):
        sha256_files(a, tmp_path / "gone")


# ---------------------------------------------------------------- ranked lists

FILE = "rankings.csv"


def _lists(*rows: tuple[int, str, str, str], list_name: str = "list") -> dict[str, list[str]]:
    ranked = RankedLists(FILE, list_name=list_name)
    for row in rows:
        ranked.add(*row)
    return ranked.lists()


def test_ranked_lists_in_rank_order() -> None:
    rows = [(2, "q1", "2", "b"), (3, "q2", "1", "c"), (4, "q1", "1", "a"), (5, "q1", "3", "d")]
    out = _lists(*rows)
    assert out == {"q1": ["a", "b", "d"], "q2": ["c"]} and list(out) == ["q1", "q2"]
    assert _lists((2, "q1", "1", "a"), (3, "q2", "1", "a")) == {"q1": ["a"], "q2": ["a"]}  # per-query checks


@pytest.mark.parametrize(
    ("rows", "message", "field"),
    [
        (
            [(2, "q1", "1", "a"), (3, "q1", "3", "b")],
            "ranks of this colon list are not 1..2: rank 2 is missing (rank 3 is on line 3)",
            "rank",
        ),
        (
            [(2, "q1", "1", "a"), (3, "q1", "1", "b")],
            "line 3: rank 1 appears twice for this query (also on line 2)",
            "rank",
        ),
        (
            [(2, "q1", "1", "a"), (3, "q1", "2", "a")],
            "line 3: 'a' is retrieved twice for this query (also on line 2)",
            "retrieved",
        ),
        ([(2, "q1", "1", "q1")], "line 2: the query retrieves itself", "retrieved"),
        ([(2, "q1", "0", "a")], "line 2: rank must be >= 1 (ranks start at 1), got 0", "rank"),
        ([(2, "q1", "-3", "a")], "line 2: rank must be >= 1 (ranks start at 1), got -3", "rank"),
        ([(2, "q1", "1.5", "a")], "line 2: rank must be an integer, got '1.5'", "rank"),
        ([(2, "q1", "", "a")], "line 2: rank must be an integer, got ''", "rank"),
    ],
)
def test_ranked_list_errors_name_file_line_case_and_field(rows, message: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        _lists(*rows, list_name="colon list")
    e = err.value
    assert message in e.message, e.message
    assert (e.file, e.case_id, e.field) == (FILE, "q1", field)
    assert f"[file={FILE}, case=q1, field={field}]" in str(e)


# ---------------------------------------------------------------- regular files, size limits, file sets


def test_inputs_follow_symlinks_evidence_does_not(tmp_path: Path) -> None:
    """Data folders may be DVC / git-annex links (followed); a results folder's files may not (refused)."""
    target = tmp_path / "target.bin"
    target.write_bytes(b"data")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    assert read_bytes(link) == b"data"
    with pytest.raises(InputError, match="symbolic link: refused") as err:
        read_regular_file(link)
    assert err.value.file == str(link)


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_non_regular_files_are_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "thing"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    for reader in (read_bytes, read_regular_file):
        with pytest.raises(InputError, match="not a regular file") as err:
            reader(path, case_id="c1")
        assert err.value.file == str(path) and err.value.case_id == "c1"


def test_a_size_limit_is_checked_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 100)
    assert read_bytes(path, max_bytes=100) == b"x" * 100
    with pytest.raises(InputError, match="file is 100 bytes, more than the 99 bytes allowed"):
        read_bytes(path, max_bytes=99)


def test_a_file_set_replaces_its_members_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_file_set(out, {"a.json": b"1", "b.json": b"2"})
    (out / "other.txt").write_bytes(b"keep")
    paths = write_file_set(out, {"a.json": b"10", "b.json": b"20"})
    assert paths == {"a.json": out / "a.json", "b.json": out / "b.json"}
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {"a.json": b"10", "b.json": b"20", "other.txt": b"keep"}
