"""``trackeval init`` as one transaction (issue 34): odd or malformed YAML is a one-line error naming the file and
line (never a traceback), nothing changes on any failure, and the user's YAML keeps its bytes outside trackeval's
entries (comments, anchors, YAML 1.2 values as DVC reads them); symbolic links are written through, modes kept,
read-only files refused without ``--force``.

The repositories are a folder with a ``.git`` entry (all init checks) and the files each case needs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml
from ruamel.yaml import YAML

import trackeval.io.atomic as atomic
from trackeval.io.atomic import write_files

#: a params.yaml with what a YAML 1.1 re-dump used to change: comments, anchors and an alias, `yes`, `0755`,
#: `012345`, a key `on`, NaN, a merge key, and a foreign section after trackeval's own `umd`
PARAMS = """\
# my knobs: DVC reads this file as YAML 1.2
mymodel: &base   # anchored
  flag: yes        # a string in YAML 1.2
  mode: 0755       # 755 in YAML 1.2 (493 in 1.1)
  zip: 012345
  on: true
  ratio: .nan
  'quoted': "kept as written"
  list:
    - a
    -   b
other:
  <<: *base
  extra: 1   # overrides
"""
FOREIGN_AFTER = """\
foreign:
  # indented comment
  when: 2024-01-02
  octal: 0o17
  folded: >
    two
    lines
"""

DVC = """\
# my pipeline
vars:
  - base: &b
      deps: [predict.py]   # inline comment
stages:
  predict:
    foreach: [v1, v2]
    do:
      cmd: python predict.py ${item} --flag "quoted"  'x'
      deps:
        - predict.py
      outs:
        - predictions/${item}
  other:
    cmd: echo yes   # a string to DVC
# plots of mine
plots:
  - foo.csv
"""


def _repo(root: Path, **files: str) -> Path:
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True)
    for name, text in files.items():
        path = repo / name.replace("__", "/").replace("_dot_", ".")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    return repo


def _snapshot(repo: Path) -> dict[str, tuple[str, bytes | str, int]]:
    """Every entry under ``repo`` (but .git): kind, bytes (a link's target) and mode."""
    out = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        st = path.lstat()
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path), 0)
        elif path.is_dir():
            out[rel] = ("dir", b"", stat.S_IMODE(st.st_mode))
        else:
            out[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
    return out


def _init(cli, repo: Path, *more: str):
    return cli("init", "--root", repo, "--model", "m", *more)


# --- TRACEBACK: odd or malformed YAML is one line naming the file and line, and nothing is written ------------


@pytest.mark.parametrize(
    ("name", "text", "needles"),
    [
        (
            "dvc.yaml",
            "stages:\n  - predict\n",
            ("'stages' on line 1 must be a mapping", "a sequence", "[file=dvc.yaml"),
        ),
        ("dvc.yaml", "stages: 5\n", ("'stages' on line 1 must be a mapping", "not the value 5", "field=stages")),
        ("dvc.yaml", "stages: {}\nplots: 5\n", ("'plots' on line 2 must be a list of plots", "not the value 5")),
        ("dvc.yaml", "plots:\n  a: b\n", ("'plots' on line 1 must be a list of plots", "not a mapping")),
        (
            "dvc.yaml",
            "stages:\n  predict:\n    cmd: a\n  predict:\n    cmd: b\n",
            ("key 'stages.predict' is repeated (lines 2 and 4)", "[file=dvc.yaml]"),
        ),
        ("dvc.yaml", "stages:\n  a: [1, 2\n", ("malformed YAML on line 3", "[file=dvc.yaml]")),
        ("dvc.yaml", "stages:\n  a: 1\n b: 2\n", ("malformed YAML on line 3", "[file=dvc.yaml]")),
        ("dvc.yaml", "- 1\n- 2\n", ("must hold a block mapping at the top level (line 1)", "[file=dvc.yaml]")),
        ("dvc.yaml", "stages: {}\n---\nstages: {}\n", ("malformed YAML on line 2", "another document")),
        ("params.yaml", "mymodel:\n  a: 1\n  b: [\n", ("malformed YAML on line 4", "[file=params.yaml]")),
        ("params.yaml", "a: 1\na: 2\n", ("key 'a' is repeated (lines 1 and 2)", "[file=params.yaml]")),
        ("params.yaml", "- 1\n", ("must hold a mapping at the top level (line 1)", "[file=params.yaml]")),
        ("params.yaml", "a: !!python/object:os.system 1\n", ("malformed YAML on line 1", "[file=params.yaml]")),
        ("params.yaml", "[" * 5000 + "]" * 5000 + "\n", ("nested too deeply", "[file=params.yaml]")),
        ("params.yaml", b"a: \xff\n".decode("latin-1"), ()),  # latin-1 bytes: not UTF-8 (checked below)
    ],
)
def test_odd_yaml_is_one_line_and_nothing_written(cli, tmp_path: Path, name: str, text: str, needles) -> None:
    repo = _repo(tmp_path, **{"_dot_gitignore": "mine\n"})
    path = repo / name
    path.write_bytes(text.encode("latin-1") if "\xff" in text else text.encode("utf-8"))
    before = _snapshot(repo)
    out = _init(cli, repo)
    line = out.one_line_error(*needles)
    if "\xff" in text:
        assert "not UTF-8 text" in line and "[file=params.yaml]" in line
    assert _snapshot(repo) == before


@pytest.mark.parametrize("text", ["stages:\n", "stages: ~\nplots:\n", "stages: {}\nplots: []\n", "# just this\n", ""])
def test_empty_stages_or_plots_are_filled_in(cli, tmp_path: Path, text: str) -> None:
    """An empty ``stages:``/``plots:`` (or an empty dvc.yaml) is nothing to keep: init writes its own there."""
    repo = _repo(tmp_path, dvc_dot_yaml=text)
    assert _init(cli, repo).rc == 0
    new = (repo / "dvc.yaml").read_text(encoding="utf-8")
    if text.startswith("#"):
        assert new.startswith(text + "\n")  # the user's comment kept
    data = YAML(typ="rt").load(new)
    assert list(data["stages"]) == ["trackeval_evaluate_umd", "trackeval_track", "trackeval_gate"]
    assert [next(iter(p)) for p in data["plots"]] == ["trackeval_umd"]


# --- INTEGRITY: all or nothing -------------------------------------------------------------------------------


def test_github_as_a_file_changes_nothing(cli, tmp_path: Path) -> None:
    """`.github` is a regular file: refused before any write (was: params.yaml, dvc.yaml and .gitignore written)."""
    repo = _repo(tmp_path, params_dot_yaml=PARAMS, dvc_dot_yaml=DVC, _dot_github="not a folder\n")
    before = _snapshot(repo)
    _init(cli, repo).one_line_error(".github is a file, not a folder", ".github/workflows/trackeval.yml")
    assert _snapshot(repo) == before  # no .dvc/plots either
    assert _init(cli, repo).rc == 2  # and the re-run needs no --force: nothing was half-done


@pytest.mark.parametrize("fail_at", [1, 3, 8])
def test_a_failing_rename_puts_every_file_back(cli, tmp_path: Path, monkeypatch, fail_at: int) -> None:
    """A rename failing at the first, third or last of the eight files: every file and folder as before."""
    repo = _repo(tmp_path, params_dot_yaml=PARAMS, dvc_dot_yaml=DVC, _dot_gitignore="mine\n")
    before = _snapshot(repo)
    real, calls = os.replace, []

    def replace(src, dst):
        if len(calls) < fail_at:  # the renames of the new files; then the undo's, not counted
            calls.append(dst)
            if len(calls) == fail_at:
                raise OSError(28, "No space left on device", str(dst))
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    _init(cli, repo).one_line_error("No space left on device")
    assert len(calls) == fail_at
    assert _snapshot(repo) == before  # no file changed, no .github/.dvc folder, no temporary left


def test_write_files_across_folders_undoes_everything(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a.txt").write_bytes(b"old a")
    (tmp_path / "b.txt").write_bytes(b"old b")
    os.chmod(tmp_path / "b.txt", 0o640)
    write_files({tmp_path / "a.txt": b"A", tmp_path / "x/y/c.txt": b"C", tmp_path / "b.txt": b"B"}, modes={
        tmp_path / "b.txt": 0o640
    })  # fmt: skip
    assert (tmp_path / "x/y/c.txt").read_bytes() == b"C" and (tmp_path / "a.txt").read_bytes() == b"A"
    assert stat.S_IMODE((tmp_path / "b.txt").stat().st_mode) == 0o640
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    real = os.fsync

    def fsync(fd):  # fails at the end, after every rename: all are undone
        if os.path.isdir(f"/proc/self/fd/{fd}") or not os.path.exists("/proc"):
            raise OSError(5, "Input/output error")
        return real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    with pytest.raises(OSError, match="Input/output"):
        write_files({tmp_path / "a.txt": b"A2", tmp_path / "n/m.txt": b"M"})
    assert (tmp_path / "a.txt").read_bytes() == b"A"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before


# --- INTEGRITY: the user's YAML keeps its bytes, values and comments -----------------------------------------


def test_force_keeps_foreign_sections_byte_for_byte(cli, tmp_path: Path) -> None:
    """`init --force` on a params.yaml holding trackeval's sections between the user's: only the `pipeline`
    section's lines change; the user's sections are the same bytes, and read the same as YAML 1.2 (DVC)."""
    repo = _repo(tmp_path, params_dot_yaml=PARAMS, dvc_dot_yaml=DVC)
    assert _init(cli, repo).rc == 0
    first = (repo / "params.yaml").read_text(encoding="utf-8")
    assert first.startswith(PARAMS)  # appended: every byte of the user's file first
    (repo / "params.yaml").write_text(first + FOREIGN_AFTER, encoding="utf-8")
    out = _init(cli, repo, "--versions", "v1", "v2", "v3", "--force")
    assert out.rc == 0, out.err
    assert "params.yaml: sections pipeline (kept yours: mymodel, other, bootstrap, tracking, gate, umd, foreign)" in (
        out.out
    )
    second = (repo / "params.yaml").read_text(encoding="utf-8")
    assert second.startswith(PARAMS) and FOREIGN_AFTER in second
    assert second.count("# trackeval (trackeval init)") == 1 and second.count("\npipeline:") == 1
    rt, old = YAML(typ="rt").load(second), YAML(typ="rt").load(first + FOREIGN_AFTER)
    assert rt["mymodel"]["flag"] == "yes" and rt["mymodel"]["mode"] == 755 and rt["mymodel"]["zip"] == 12345
    assert "on" in rt["mymodel"] and rt["other"]["extra"] == 1 and rt["other"]["flag"] == "yes"
    assert rt["foreign"] == old["foreign"] and rt["foreign"]["octal"] == 15
    assert list(rt["pipeline"]["versions"]) == ["v1", "v2", "v3"]
    assert yaml.safe_load(second)["pipeline"]["versions"] == ["v1", "v2", "v3"]  # as trackeval's stages read it


def test_dvc_yaml_keeps_the_users_stages_and_comments(cli, tmp_path: Path) -> None:
    repo = _repo(tmp_path, params_dot_yaml=PARAMS, dvc_dot_yaml=DVC)
    assert _init(cli, repo).rc == 0
    new = (repo / "dvc.yaml").read_text(encoding="utf-8")
    head = DVC.split("# plots of mine")[0]
    assert new.startswith(head)  # the user's vars, anchors, stages, quoting and comments: the same bytes
    assert "# plots of mine\nplots:\n  - foo.csv\n  - trackeval_umd:\n" in new
    assert _init(cli, repo, "--force").rc == 0  # replaces trackeval's stages and plot, once each
    again = (repo / "dvc.yaml").read_text(encoding="utf-8")
    assert again.startswith(head) and again.count("trackeval_evaluate_umd:") == 1 and again.count("trackeval_umd:") == 1
    stages = YAML(typ="rt").load(again)["stages"]
    assert list(stages) == ["predict", "other", "trackeval_evaluate_umd", "trackeval_track", "trackeval_gate"]
    assert stages["other"]["cmd"] == "echo yes"


def test_a_pyyaml_written_dvc_yaml_without_plots(cli, tmp_path: Path) -> None:
    """Indentless sequences (PyYAML's style), no `plots:`: the stages go under `stages:`, then `plots:` after."""
    stage = {"foreach": ["v1", "v2"], "do": {"cmd": "python predict.py ${item}", "deps": ["predict.py"]}}
    text = "# my pipeline\n" + yaml.safe_dump({"stages": {"predict": stage}})
    repo = _repo(tmp_path, dvc_dot_yaml=text)
    assert _init(cli, repo).rc == 0
    new = (repo / "dvc.yaml").read_text(encoding="utf-8")
    assert new.startswith(text) and new.index("  trackeval_gate:") < new.index("\nplots:\n  - trackeval_umd:")
    data = YAML(typ="rt").load(new)
    assert list(data["stages"]) == ["predict", "trackeval_evaluate_umd", "trackeval_track", "trackeval_gate"]
    assert data["stages"]["predict"] == stage


def test_version_names_yaml_would_misread_stay_strings(cli, tmp_path: Path) -> None:
    """Version names `on`, `yes`, `0o17`, `1e3`: quoted so YAML 1.1 (trackeval) and 1.2 (DVC) read strings."""
    repo = _repo(tmp_path)
    assert _init(cli, repo, "--versions", "on", "yes", "0o17", "1e3", "012").rc == 0
    text = (repo / "params.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text)["pipeline"]["versions"] == ["on", "yes", "0o17", "1e3", "012"]
    assert list(YAML(typ="safe", pure=True).load(text)["pipeline"]["versions"]) == ["on", "yes", "0o17", "1e3", "012"]


# --- INTEGRITY: symbolic links, modes, read-only files -------------------------------------------------------


def test_symlinked_files_are_written_through(cli, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    # the files live in a folder beside the repository: one linked by an absolute path, one by a relative one
    linked = tmp_path / "linked_configs"
    linked.mkdir()
    (linked / "dvc.yaml").write_text(DVC, encoding="utf-8")
    (linked / "params.yaml").write_text(PARAMS, encoding="utf-8")
    (repo / "dvc.yaml").symlink_to(linked / "dvc.yaml")
    (repo / "params.yaml").symlink_to(Path("..") / linked.name / "params.yaml")
    assert _init(cli, repo).rc == 0
    assert (repo / "dvc.yaml").is_symlink() and (repo / "params.yaml").is_symlink()  # still links
    assert "trackeval_gate" in (linked / "dvc.yaml").read_text(encoding="utf-8")  # the targets changed
    assert (linked / "params.yaml").read_text(encoding="utf-8").startswith(PARAMS + "\n# trackeval")


def test_symlink_loop_is_one_line(cli, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "dvc.yaml").symlink_to("dvc.yaml")
    before = _snapshot(repo)
    _init(cli, repo).one_line_error("symbolic link", "[file=dvc.yaml]")
    assert _snapshot(repo) == before


def test_modes_are_kept(cli, tmp_path: Path) -> None:
    repo = _repo(tmp_path, params_dot_yaml=PARAMS, dvc_dot_yaml=DVC, _dot_gitignore="mine\n")
    os.chmod(repo / "params.yaml", 0o640)
    os.chmod(repo / "dvc.yaml", 0o600)
    assert _init(cli, repo).rc == 0
    assert stat.S_IMODE((repo / "params.yaml").stat().st_mode) == 0o640
    assert stat.S_IMODE((repo / "dvc.yaml").stat().st_mode) == 0o600


def test_read_only_file_is_refused_unless_force(cli, tmp_path: Path) -> None:
    repo = _repo(tmp_path, params_dot_yaml=PARAMS, dvc_dot_yaml=DVC)
    os.chmod(repo / "params.yaml", 0o444)
    before = _snapshot(repo)
    _init(cli, repo).one_line_error("params.yaml is read-only (mode 0444)", "--force")
    assert _snapshot(repo) == before
    assert _init(cli, repo, "--force").rc == 0
    assert stat.S_IMODE((repo / "params.yaml").stat().st_mode) == 0o444  # rewritten, still read-only
    assert "pipeline:" in (repo / "params.yaml").read_text(encoding="utf-8")
