"""io/layouts: a layout chosen from the files or forced by --format, one error line naming what was tried, and
the layout folded into the ground-truth digest (the generic layout's digest unchanged)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from trackeval.errors import InputError
from trackeval.io.layouts import Layout, choose, layout_digest, names


def _header(path: Path) -> str:
    return path.read_text().splitlines()[0]


def _unreadable(path: Path) -> bool:
    raise OSError("cannot read")


GENERIC = Layout("generic", "CSV with an image_id column", lambda p: "image_id" in _header(p), generic=True)
CHEXPERT = Layout(
    "chexpert", "CSV with a Path or Study column", lambda p: _header(p).split(",")[0] in ("Path", "Study")
)
BROKEN = Layout("broken", "never readable", _unreadable)
LAYOUTS = (BROKEN, GENERIC, CHEXPERT)


def test_the_first_matching_layout_is_chosen_and_a_failing_test_matches_nothing(tmp_path: Path) -> None:
    f = tmp_path / "valid.csv"
    f.write_text("Path,Sex,Age\nCheXpert-v1.0/valid/patient1/study1/view1_frontal.jpg,Male,60\n")
    assert choose(f, LAYOUTS).name == "chexpert"
    f.write_text("image_id,Edema\na,1\n")
    assert choose(f, LAYOUTS).name == "generic"
    assert names(LAYOUTS) == ["broken", "generic", "chexpert"]


def test_format_forces_a_layout_and_an_unknown_name_lists_the_valid_ones(tmp_path: Path) -> None:
    f = tmp_path / "labels.csv"
    f.write_text("image_id,Edema\na,1\n")
    assert choose(f, LAYOUTS, "chexpert").name == "chexpert"
    with pytest.raises(InputError) as err:
        choose(f, LAYOUTS, "chexpertt")
    assert err.value.field == "format"
    assert "unknown format 'chexpertt'" in str(err.value) and "'generic', 'chexpert'" in str(err.value)


def test_nothing_matching_is_one_line_naming_the_file_and_every_layout_tried(tmp_path: Path) -> None:
    f = tmp_path / "odd.csv"
    f.write_text("id,Edema\na,1\n")
    with pytest.raises(InputError) as err:
        choose(f, LAYOUTS, what="predictions")
    text = str(err.value)
    assert "\n" not in text and err.value.file == str(f)
    assert "the predictions looks like none of the layouts tried" in text
    for layout in LAYOUTS:
        assert f"{layout.name} ({layout.looks_like})" in text


def test_a_native_layout_changes_the_digest_and_the_generic_one_keeps_it() -> None:
    digest = hashlib.sha256(b"labels").hexdigest()
    assert layout_digest(GENERIC, digest) == digest
    expected = hashlib.sha256(f"layout:chexpert\n{digest}".encode()).hexdigest()
    assert layout_digest(CHEXPERT, digest) == expected != digest
