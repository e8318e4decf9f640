"""The layering rules, read from the source: who may import whom, and no cycles.

Every ``import`` counts, at module level or inside a function, except the ones under
``if TYPE_CHECKING:`` (they never run, so they cannot make a cycle).
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import memtui

PACKAGE = Path(memtui.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def all_modules() -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their ``__init__``): read
    once, as every module's imports are resolved against it."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_type_checking_block(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


STATEMENT_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)
"""The nodes an import statement can be under: an expression holds none (a lambda's body
is an expression), so the walk never goes into one."""


def import_nodes(node: ast.AST, *, type_checking: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node``; those under ``if TYPE_CHECKING:`` only when
    ``type_checking`` (the ``else:`` branch of such a block runs, so it always counts)."""
    pending = [
        child for child in ast.iter_child_nodes(node) if isinstance(child, STATEMENT_HOLDERS)
    ]
    while pending:
        child = pending.pop()
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif is_type_checking_block(child):
            assert isinstance(child, ast.If)
            pending.extend(child.orelse)
            if type_checking:
                pending.extend(child.body)
        else:
            pending.extend(
                grandchild
                for grandchild in ast.iter_child_nodes(child)
                if isinstance(grandchild, STATEMENT_HOLDERS)
            )


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the rules that read it."""
    return ast.parse(path.read_text(), filename=str(path))


def imported_names(name: str, path: Path, *, type_checking: bool = False) -> set[str]:
    """The dotted names ``name`` imports: ``from a import b`` gives ``a.b`` when ``a.b`` is
    a module of the package, else ``a``; relative imports are resolved."""
    known = all_modules()
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in import_nodes(parsed(path), type_checking=type_checking):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = name.split(".")
            if not is_package:
                anchor = anchor[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            candidate = f"{base}.{alias.name}"
            targets.add(candidate if candidate in known else base)
    return targets


def import_graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports (third-party imports left out)."""
    modules = all_modules()
    return {
        name: {target for target in imported_names(name, path) if target in modules}
        for name, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components that are cycles (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_graph_reader_sees_function_level_imports_and_skips_type_checking(tmp_path):
    """The reader itself: a function-level import is an edge, a TYPE_CHECKING one is not,
    relative imports resolve against the package."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import records\n"
        "from .stats import wilson_interval\n"
        "if TYPE_CHECKING:\n"
        "    from memtui.core.store import MemoryStore\n"
        "else:\n"
        "    import memtui.core.embed\n"
        "def later():\n"
        "    from memtui.core import search\n"
        "    import textual.app\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    names = imported_names("memtui.core.probe", path)
    assert names == {
        "typing",
        "memtui.core.records",
        "memtui.core.stats",
        "memtui.core.embed",
        "memtui.core.search",
        "textual.app",
    }
    assert "memtui.core.store" in imported_names("memtui.core.probe", path, type_checking=True)
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}, "b": set()}) == [["a"]]


def test_no_import_cycles_in_the_package():
    """No module reaches itself through imports, function-level imports included."""
    graph = import_graph()
    assert len(graph) >= 50
    found = cycles(graph)
    edges = [
        f"{source} -> {target}"
        for component in found
        for source in component
        for target in sorted(graph[source] & set(component))
    ]
    assert found == [], "import cycles:\n" + "\n".join(edges)


def third_party_and_package_imports(prefix: str) -> dict[str, set[str]]:
    """Module under ``prefix`` → everything it imports, TYPE_CHECKING blocks included:
    a layer must not even name the layers above it."""
    return {
        name: imported_names(name, path, type_checking=True)
        for name, path in all_modules().items()
        if name == prefix or name.startswith(prefix + ".")
    }


def violations(prefix: str, forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    found = []
    for name, targets in sorted(third_party_and_package_imports(prefix).items()):
        for target in sorted(targets):
            if any(target == bad or target.startswith(bad + ".") for bad in forbidden):
                found.append((name, target))
    return found


def test_core_imports_no_source_command_or_ui_module():
    """``memtui.core`` is the engine: no sources, commands, app or CLI, no UI library."""
    forbidden = (
        "memtui.sources",
        "memtui.commands",
        "memtui.tui",
        "memtui.cli",
        "textual",
        "rich",
        "click",
    )
    assert len(third_party_and_package_imports("memtui.core")) >= 10
    found = violations("memtui.core", forbidden)
    assert found == [], "\n".join(f"{name} imports {target}" for name, target in found)


def test_sources_import_no_command_app_or_cli_module():
    """``memtui.sources`` read and change stores; the commands, the app and the CLI sit
    above them."""
    forbidden = ("memtui.commands", "memtui.tui", "memtui.cli")
    assert len(third_party_and_package_imports("memtui.sources")) >= 10
    found = violations("memtui.sources", forbidden)
    assert found == [], "\n".join(f"{name} imports {target}" for name, target in found)


def test_core_imports_no_ui_library():
    code = (
        "import sys\n"
        "import memtui.core.records, memtui.core.store, memtui.core.embed, memtui.core.corpus\n"
        "import importlib.util\n"
        "for name in ('memtui.core.search', 'memtui.core.lanes'):\n"
        "    if importlib.util.find_spec(name):\n"
        "        importlib.import_module(name)\n"
        "import importlib\n"
        "bad = [m for m in ('textual', 'rich', 'click') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_app_reads_and_changes_stores_only_through_memory_source():
    """The views never reach past ``MemorySource``: no store, no lane or search engine,
    no native record type, no SQL. (Opening a file is the launcher's job.)"""
    import memtui.tui

    forbidden_modules = {"memtui.core.lanes", "memtui.core.stats", "memtui.core.vector_cache"}
    forbidden_names = {"MemoryStore", "MemoryRecord", "hybrid_search", "explain_keyword"}
    folder = Path(memtui.tui.__file__).parent
    checked = 0
    for path in sorted(folder.rglob("*.py")):
        if path.name in ("launch.py", "testing.py"):
            continue
        tree = parsed(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module not in forbidden_modules, (path.name, node.module)
                names = {alias.name for alias in node.names}
                assert not names & forbidden_names, (path.name, names & forbidden_names)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name not in forbidden_modules, (path.name, alias.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not re.search(r"\bSELECT\b.*\bFROM\b", node.value, re.S | re.I), path.name
        checked += 1
    assert checked >= 10
