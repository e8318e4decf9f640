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
