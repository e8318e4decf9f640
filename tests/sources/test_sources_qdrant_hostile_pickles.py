"""Hostile pickled points in a real Qdrant folder: a point inside itself, a 200,000-deep
nesting, a "billion laughs" of a few hundred bytes, and keys that cost their whole size to hash
(a laughs tuple, a 200,000-deep tuple that overflows the C stack).

Each pickle is written here byte by byte, planted beside the points qdrant-client
wrote, and refused alone in one line; the rest of the collection opens (records,
search, info), and nothing is refused that a real point holds.
"""

from __future__ import annotations

import base64
import json
import pickle
import re
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT, fixed_clock
from fixtures.qdrant_support import make_cyber_folder, pid

from memtui.cli import main
from memtui.sources import open_source
from memtui.sources.safe_pickle import MAX_DEPTH, PickleLimitError, load_plain, load_point

STORAGE = Path("collection") / "cyber_autoagent_memories" / "storage.sqlite"
MODELS = b"qdrant_client.http.models.models"


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


# ---------------------------------------------------------------- pickles, by hand


def text(value: str) -> bytes:
    """SHORT_BINUNICODE."""
    raw = value.encode()
    return b"\x8c" + bytes([len(raw)]) + raw


def point(payload: bytes, *, n: int = 900) -> bytes:
    """A protocol-4 PointStruct as qdrant-client pickles one: NEWOBJ, then BUILD with
    ``{'__dict__': {'id': ..., 'vector': [...], 'payload': <payload>}}``."""
    vector = b"](" + b"".join(b"G" + struct.pack(">d", 0.5) for _ in range(8)) + b"e"
    return (
        b"\x80\x04"
        + text(MODELS.decode())
        + text("PointStruct")
        + b"\x93)\x81"  # STACK_GLOBAL, EMPTY_TUPLE, NEWOBJ
        + b"}("
        + text("__dict__")
        + b"}("
        + text("id")
        + text(pid(n))
        + text("vector")
        + vector
        + text("payload")
        + payload
        + b"uub."  # SETITEMS, SETITEMS, BUILD, STOP
    )


def payload(name: str, value: bytes) -> bytes:
    """``{'memory': 'hostile <name>', <name>: <value>}``."""
    return b"}(" + text("memory") + text(f"hostile {name}") + text(name) + value + b"u"


def self_loop() -> bytes:
    """A list that holds itself: EMPTY_LIST, BINPUT 1, BINGET 1, APPEND."""
    return b"]q\x01h\x01a"


def deep(levels: int = 200_000) -> bytes:
    """A list in a list ... ``levels`` deep: EMPTY_LIST n times, APPEND n - 1 times."""
    return b"]" * levels + b"a" * (levels - 1)


def laughs(levels: int = 9, width: int = 10, tuples: bool = False) -> bytes:
    """Each level ``width`` references to the one below (memo slots 10..), 'lol' at the
    bottom: ``width ** levels`` values once expanded, in a few hundred bytes."""
    out = text("lol") + b"q\x0a0"  # BINPUT 10, POP
    for level in range(1, levels + 1):
        refs = b"h" + bytes([9 + level])
        if tuples:
            out += b"(" + refs * width + b"tq" + bytes([10 + level]) + b"0"  # MARK .. TUPLE
        else:
            out += b"]q" + bytes([10 + level]) + b"(" + refs * width + b"e0"  # APPENDS
    return out + b"h" + bytes([10 + levels])


def as_key(value: bytes) -> bytes:
    """``{<value>: 1}``: the value is hashed while the pickle is loaded."""
    return b"}" + value + b"K\x01s"


def deep_tuple(levels: int = 200_000) -> bytes:
    """``((((),),),)`` ``levels`` deep: EMPTY_TUPLE, then TUPLE1 n times."""
    return b")" + b"\x85" * levels


HOSTILE = {
    "self-loop": (point(payload("loop", self_loop())), "holds a container inside itself"),
    "200k-deep": (point(payload("nest", deep())), f"nests deeper than {MAX_DEPTH} levels"),
    "billion-laughs": (
        point(payload("lol", laughs())),
        "expands to more than 1,000,000 values (a shared part counted each time)",
    ),
    "laughs-key": (
        point(payload("key", as_key(laughs(levels=7, tuples=True)))),
        "uses a container as a dict key",
    ),
}


@pytest.mark.parametrize(("blob", "reason"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_point_is_refused_by_the_bound_it_breaks(blob, reason):
    with pytest.raises(PickleLimitError) as raised:
        load_point(blob)
    assert str(raised.value).startswith(reason)


def test_an_old_pickles_set_of_nested_tuples_is_refused():
    """Protocol 3 builds a set by calling ``builtins.set`` on a list: its members are
    hashed then, so they are held to plain values too."""
    members = b"](" + laughs(levels=7, tuples=True) + b"e"
    tags = b"cbuiltins\nset\n" + members + b"\x85R"  # GLOBAL, the list, TUPLE1, REDUCE
    with pytest.raises(PickleLimitError, match="as a set member"):
        load_point(point(payload("tags", tags)))


def test_what_real_points_hold_is_not_refused():
    """Sharing without a cycle, nesting within the bound, long vectors and big payloads."""
    shared = b"]q\x01(" + text("a") + text("b") + b"e" + b"0"
    within = b"]" * (MAX_DEPTH - 4) + b"a" * (MAX_DEPTH - 5)
    body = shared + payload("twice", b"](h\x01h\x01e") + b"0" + payload("nest", within)
    assert load_plain(b"\x80\x04" + body + b".")["nest"] is not None
    from qdrant_client.http import models

    real = models.PointStruct(
        id=7,
        vector=[0.25] * 3072,
        payload={"memory": "x" * 100_000, "metadata": {"tags": [{"k": [1, 2]}] * 50}},
    )
    for protocol in (2, 3, 4, 5):
        fields = load_point(pickle.dumps(real, protocol=protocol)).fields
        assert len(fields["vector"]) == 3072 and fields["payload"]["memory"] == "x" * 100_000


# ---------------------------------------------------------------- in a real folder


@pytest.fixture
def folder(tmp_path) -> Path:
    return make_cyber_folder(tmp_path / "qdrant", web_cache=False)


def plant(folder: Path, blob: bytes, n: int = 900) -> int:
    """Add a row as qdrant-client keys one (base64 of the pickled id); its rowid."""
    key = base64.b64encode(pickle.dumps(pid(n), protocol=4)).decode()
    conn = sqlite3.connect(folder / STORAGE)
    rowid = conn.execute("INSERT INTO points VALUES (?, ?)", (key, blob)).lastrowid
    conn.commit()
    conn.close()
    assert rowid is not None
    return rowid


def refusal(rowid: int, reason: str) -> re.Pattern[str]:
    return re.compile(
        rf"refused point row {rowid}: its pickle {re.escape(reason)}.* \(collection "
        r"cyber_autoagent_memories\); the rest of the collection is read \(the row is left as "
        r"it is\)"
    )


@pytest.mark.parametrize(("blob", "reason"), HOSTILE.values(), ids=HOSTILE.keys())
def test_the_rest_of_the_collection_opens_and_the_point_is_named(folder, blob, reason):
    with open_source(folder, clock=fixed_clock) as source:
        before = {r.id for r in source.page(limit=100, include_hidden=True).records}
    rowid = plant(folder, blob)
    with open_source(folder, clock=fixed_clock) as source:
        after = {r.id for r in source.page(limit=100, include_hidden=True).records}
        assert after == before
        [line] = source.refused
        assert refusal(rowid, reason).fullmatch(line)
        assert line in source.summary().notes
        found = source.search("CSRF token login", limit=5).results
        assert found and found[0].id == f"qd:{pid(1)}"


def test_records_search_and_info_say_it_in_one_line(folder):
    blob, reason = HOSTILE["billion-laughs"]
    rowid = plant(folder, blob)
    runner = CliRunner()
    for args in (["records", folder, "--json"], ["search", folder, "CSRF token", "--json"]):
        result = runner.invoke(main, [str(a) for a in args])
        assert result.exit_code == 0, result.output
        [line] = [line for line in result.stderr.splitlines() if line.startswith("warning")]
        assert refusal(rowid, reason).search(line)
        assert "Traceback" not in result.stderr
        assert json.loads(result.stdout)
    info = runner.invoke(main, ["info", str(folder)])
    assert info.exit_code == 0
    assert refusal(rowid, reason).search(re.sub(r"\s*\n\s*", " ", info.stdout))


def child(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter: one without the bounds dies of what is tried, not this run."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )


def test_a_point_that_would_crash_the_interpreter_is_refused_in_one_line(folder, tmp_path):
    """A 200,000-deep tuple as a dict key: hashing it recursed in C until the process died."""
    rowid = plant(folder, point(payload("key", as_key(deep_tuple()))))
    shown = child(tmp_path, "-m", "memtui", "records", str(folder))
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.count("\n") == 1
    assert refusal(rowid, "uses a container as a dict key").search(shown.stderr)
    assert "Login form at /login" in shown.stdout


def test_a_row_key_that_would_crash_the_interpreter_is_refused(tmp_path):
    """The row keys (pickled ids, read to forget a point) are held to the same bounds."""
    key = tmp_path / "key.pickle"
    key.write_bytes(b"\x80\x04" + as_key(deep_tuple()) + b".")
    code = (
        "import pathlib, sys\n"
        "from memtui.sources.safe_pickle import PickleLimitError, load_plain\n"
        "try:\n"
        "    load_plain(pathlib.Path(sys.argv[1]).read_bytes())\n"
        "except PickleLimitError as exc:\n"
        "    print(exc)\n"
    )
    refused = child(tmp_path, "-c", code, str(key))
    assert refused.returncode == 0, refused.stderr
    assert refused.stdout.startswith("uses a container as a dict key")


def test_many_refused_points_are_each_named_on_stderr_and_counted_in_the_summary(folder):
    blob, reason = HOSTILE["self-loop"]
    rows = [plant(folder, blob, n=900 + i) for i in range(5)]
    with open_source(folder, clock=fixed_clock) as source:
        assert len(source.refused) == 5
        notes = source.summary().notes
        assert sum(note.startswith("refused point row") for note in notes) == 3
        assert "and 2 more refused points (memtui records names each, on stderr)" in notes
    result = CliRunner().invoke(main, ["records", str(folder)])
    assert result.exit_code == 0
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning")]
    assert len(warned) == 5
    for rowid, line in zip(sorted(rows, reverse=True), warned, strict=True):
        assert refusal(rowid, reason).search(line)
