"""Functions a reader can hold at once: every function in src/ has at most :data:`MAX_LINES` lines (without its
docstring) and a cyclomatic complexity of at most :data:`MAX_COMPLEXITY`, unless the line right above it (or
above its decorators) is a comment ``# long: <the reason>``.

Complexity is McCabe's, counted as radon does: 1, plus 1 per ``if``/``elif``, conditional expression, loop,
``except``, ``assert``, ``case``, comprehension ``for`` and ``if``, plus one per extra operand of ``and``/``or``;
a nested function or class counts on its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "trackeval"
MAX_LINES = 60
MAX_COMPLEXITY = 15
#: lines of any module of src/, and of a module of the tracking layer (MLflow reads and writes, one job each)
MAX_MODULE_LINES = 600
MAX_TRACKING_MODULE_LINES = 400

_BRANCHES = (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.Assert, ast.match_case)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def complexity(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """McCabe complexity of ``fn``'s own body (nested functions, lambdas and classes excluded)."""
    n = 1
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, _BRANCHES):
            n += 1
        elif isinstance(node, ast.comprehension):
            n += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        stack.extend(ast.iter_child_nodes(node))
    return n


def length(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from ``def`` to the last line of the body, without the docstring."""
    lines = fn.end_lineno - fn.lineno + 1  # type: ignore[operator]
    first = fn.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines -= first.end_lineno - first.lineno + 1  # type: ignore[operator]
    return lines


def _excused(fn: ast.FunctionDef | ast.AsyncFunctionDef, source: list[str]) -> bool:
    top = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    return top >= 2 and source[top - 2].strip().startswith("# long:")


def oversized(root: Path = SRC) -> list[str]:
    """``path:line name (N lines, complexity C)`` of every function over the limits without a ``# long:`` reason."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        source = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n, c = length(node), complexity(node)
                if (n > MAX_LINES or c > MAX_COMPLEXITY) and not _excused(node, source):
                    found.append(
                        f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({n} lines, complexity {c})"
                    )
    return found


def test_functions_fit_on_a_screen() -> None:
    assert oversized() == []


def test_modules_have_one_job() -> None:
    """No module over :data:`MAX_MODULE_LINES` lines; none in ``tracking/`` over :data:`MAX_TRACKING_MODULE_LINES`."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        limit = MAX_TRACKING_MODULE_LINES if path.parent == SRC / "tracking" else MAX_MODULE_LINES
        if n > limit:
            found.append(f"{path.relative_to(SRC.parent)} ({n} lines, limit {limit})")
    assert found == []


def _functions(source: str) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    return 1\n", 1),
        ("def f(a, b):\n    if a and b or a:\n        return [x for x in a if x if b]\n    return 0\n", 7),
        (
            "def f(a):\n    for x in a:\n        try:\n            f(x)\n        except OSError:\n            raise\n",
            3,
        ),
        ("def f(a):\n    def g():\n        if a:\n            pass\n    return a if a else g\n", 2),
    ],
)
def test_complexity_counts_like_radon(source: str, expected: int) -> None:
    assert complexity(_functions(source)[0]) == expected


def test_a_long_function_needs_a_written_reason(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text(f'def long_one():\n    """Doc\n    lines."""\n{body}')
    (pkg / "b.py").write_text(f"# long: a table of constants reads best in one place\ndef excused():\n{body}")
    (pkg / "c.py").write_text(f'def short_with_doc():\n    """{"x" * 10}\n' + "\n" * 80 + '    """\n    return 1\n')
    assert oversized(pkg) == [f"pkg/a.py:1 long_one ({MAX_LINES + 1} lines, complexity 1)"]
