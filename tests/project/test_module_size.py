"""Small modules with one job: no module over 600 lines, no function over 80."""

from __future__ import annotations

import ast
from pathlib import Path

import memtui

PACKAGE = Path(memtui.__file__).resolve().parent
MODULE_LINES = 600
FUNCTION_LINES = 80


def python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def function_lengths(path: Path) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, length)`` of every function and method in ``path``,
    nested ones included; a function runs from its ``def`` line to its last line (its
    decorators are not counted)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    found.append((name, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def test_the_function_reader_measures_decorators_methods_and_nested_functions(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text(
        "class A:\n"
        "    @property\n"
        "    def b(self):\n"
        "        def c():\n"
        "            return 1\n"
        "        return c\n"
        "async def d():\n"
        "    pass\n"
    )
    assert function_lengths(path) == [("A.b", 3, 4), ("A.b.c", 4, 2), ("d", 7, 2)]


def test_no_module_over_600_lines():
    files = python_files()
    assert len(files) >= 50
    long = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in files
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}, "\n".join(f"{name}: {lines} lines" for name, lines in sorted(long.items()))


def test_no_function_over_80_lines():
    long = [
        (str(path.relative_to(PACKAGE.parent)), name, line, length)
        for path in python_files()
        for name, line, length in function_lengths(path)
        if length > FUNCTION_LINES
    ]
    assert long == [], "\n".join(
        f"{file}:{line} {name}: {length} lines" for file, name, line, length in long
    )
