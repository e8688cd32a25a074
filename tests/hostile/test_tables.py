"""CSV manifests are parsed by the csv module on the real text: quoted line breaks survive, Unicode line separators
are data, and a ragged or malformed row is an error naming the file and the physical line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import umd_argv
from trackeval.errors import InputError
from trackeval.io.tables import read_csv_rows

HEADER = "case_id,subject_id,modality,site"

#: (id, body after the header, the rows read): each body broke or was silently changed by splitlines()
ACCEPTED = [
    ("quoted_lf", 's1_ct,s1,ct,"north\nwing"\n', [("s1_ct", "north\nwing")]),
    ("quoted_crlf", 's1_ct,s1,ct,"north\r\nwing"\r\n', [("s1_ct", "north\r\nwing")]),
    ("quoted_cr", 's1_ct,s1,ct,"north\rwing"\n', [("s1_ct", "north\rwing")]),
    ("unicode_line_separator", "s1_ct,s1,ct,north\u2028wing\n", [("s1_ct", "north\u2028wing")]),
    ("unicode_paragraph_separator", "s1_ct,s1,ct,north\u2029wing\n", [("s1_ct", "north\u2029wing")]),
    ("next_line_c1", "s1_ct,s1,ct,north\x85wing\n", [("s1_ct", "north\x85wing")]),
    ("form_feed", "s1_ct,s1,ct,north\x0cwing\n", [("s1_ct", "north\x0cwing")]),
    ("vertical_tab", "s1_ct,s1,ct,north\x0bwing\n", [("s1_ct", "north\x0bwing")]),
    ("nul_byte", "s1_ct,s1,ct,no\x00rth\n", [("s1_ct", "no\x00rth")]),
    ("file_separator", "s1_ct,s1,ct,north\x1cwing\n", [("s1_ct", "north\x1cwing")]),
    ("quoted_comma_and_quote", 's1_ct,s1,ct,"a, ""b"""\n', [("s1_ct", 'a, "b"')]),
    ("two_rows_after_multiline", 's1_ct,s1,ct,"a\nb"\ns1_pet,s1,pet,c\n', [("s1_ct", "a\nb"), ("s1_pet", "c")]),
]


@pytest.mark.parametrize(("body", "rows"), [a[1:] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED])
def test_line_breaks_inside_values_are_data(tmp_path: Path, body: str, rows) -> None:
    path = tmp_path / "manifest.csv"
    path.write_bytes((HEADER + "\n" + body).encode("utf-8"))
    got = read_csv_rows(path, required=("case_id",))
    assert [(r["case_id"], r["site"]) for r in got] == rows


#: (id, body after the header, message, line): the line is where the bad row starts, counting quoted line breaks
REFUSED = [
    ("too_many_fields", "s1_ct,s1,ct,a\ns1_pet,s1,pet,a,extra\n", "line 3 has 5 fields, the header has 4", 3),
    ("too_few_fields", "s1_ct,s1,ct\n", "line 2 has 3 fields", 2),
    ("ragged_after_multiline", 's1_ct,s1,ct,"a\nb\nc"\ns1_pet,s1,pet\n', "line 5 has 3 fields", 5),
    ("unterminated_quote", 's1_ct,s1,ct,"north\n', "malformed CSV", 2),
    ("text_after_closing_quote", 's1_ct,s1,ct,"north"wing\n', "malformed CSV", 2),
]


@pytest.mark.parametrize(("body", "needle", "line"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_bad_row_names_the_file_and_line(tmp_path: Path, body: str, needle: str, line: int) -> None:
    path = tmp_path / "manifest.csv"
    path.write_bytes((HEADER + "\n" + body).encode("utf-8"))
    with pytest.raises(InputError, match=needle) as err:
        read_csv_rows(path, required=("case_id",))
    assert err.value.file == str(path) and err.value.field == f"line {line}"


@pytest.mark.parametrize(("body", "needle", "line"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_bad_manifest_row_stops_evaluate(umd_dataset, tmp_path: Path, cli, body: str, needle: str, line: int):
    gt, pred = umd_dataset()
    (gt / "manifest.csv").write_bytes((HEADER + "\n" + body).encode("utf-8"))
    out = tmp_path / "out"
    res = cli(*umd_argv(gt, pred, out, "--executor", "local", "--set", "bootstrap.n_resamples=20"))
    res.one_line_error(needle, f"file={gt / 'manifest.csv'}", f"field=line {line}", rc=2)
    assert not out.exists()


def test_a_multiline_group_value_reaches_the_results(umd_dataset, tmp_path: Path, cli) -> None:
    """A quoted line break in a group column is kept as the case's group value (it used to vanish)."""
    gt, pred = umd_dataset()
    rows = [f'{c},{c[:2]},{c[3:]},"north\nwing"' for c in ("s1_ct", "s1_pet", "s2_ct", "s2_pet")]
    (gt / "manifest.csv").write_text(HEADER + "\n" + "\n".join(rows) + "\n", encoding="utf-8", newline="")
    out = tmp_path / "out"
    assert cli(*umd_argv(gt, pred, out, "--executor", "local", "--set", "bootstrap.n_resamples=20")).rc == 0
    from trackeval.io.results_folder import read_results

    assert {c.groups["site"] for c in read_results(out).cases} == {"north\nwing"}
