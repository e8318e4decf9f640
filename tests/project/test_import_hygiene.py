import subprocess
import sys


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
    import ast
    import re
    from pathlib import Path

    import memtui.tui

    forbidden_modules = {"memtui.core.lanes", "memtui.core.stats", "memtui.core.vector_cache"}
    forbidden_names = {"MemoryStore", "MemoryRecord", "hybrid_search", "explain_keyword"}
    folder = Path(memtui.tui.__file__).parent
    checked = 0
    for path in sorted(folder.glob("*.py")):
        if path.name in ("launch.py", "testing.py"):
            continue
        tree = ast.parse(path.read_text())
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
