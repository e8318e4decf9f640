"""Hostile names through every CLI line: a Qdrant folder's and collection's names, a store
file's name and memtui's cache folder hold terminal escapes (an OSC 0 title, an OSC 52
clipboard write, a CSI 2J screen clear, a C1 CSI, a bidi override).

Every line that names one (a records header, search's "indexing …" line, info, the
collection picker's error, an output line, click's own refusal of a path) shows the
escapes as visible text; no raw control character reaches the terminal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from memtui.cli import main
from memtui.core.embed import HashEmbedder
from memtui.render import escape_controls

NAME = "notes\x1b]0;PWNED-TITLE\x07\x1b]52;c;SGVsbG8=\x07\x1b[2J\u009b\u202e"
SHOWN = escape_controls(NAME)
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
CORPUS = [
    {"tier": "episodic", "record_type": "observation", "content": "alpha login form"},
    {"tier": "episodic", "record_type": "observation", "content": "beta token leak"},
]


@pytest.fixture(autouse=True)
def hostile_cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / f"cache{NAME}"
    monkeypatch.setenv("MEMTUI_CACHE_DIR", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("MEMTUI_NOW", "2026-11-30T12:00:00Z")
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    return folder


@pytest.fixture
def folder(tmp_path) -> Path:
    """A Qdrant folder named with escapes, holding a collection named with escapes and
    an empty ``other`` (so that naming none is refused with the list of both)."""
    from qdrant_client import QdrantClient, models

    path = tmp_path / f"agent{NAME}"
    embed = HashEmbedder(8)
    client = QdrantClient(path=str(path))
    try:
        for name in (NAME, "other"):
            client.create_collection(
                name, vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE)
            )
        client.upsert(
            NAME,
            points=[
                models.PointStruct(id=n, vector=embed.embed_one(row["content"]), payload=row)
                for n, row in enumerate(CORPUS, start=1)
            ],
            wait=True,
        )
    finally:
        client.close()
    return path


def run(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    found = sorted({f"U+{ord(c):04X}" for c in RAW_CONTROL.findall(result.output)})
    assert not found, f"raw controls reached the terminal: {found}\n{result.output!r}"
    return result.output


COLLECTION_COMMANDS = {
    "records": ("records", "{folder}", "--collection", NAME),
    "search (indexing line)": ("search", "{folder}", "alpha", "--collection", NAME),
    "info": ("info", "{folder}", "--collection", NAME),
    "audit": ("audit", "{folder}", "--collection", NAME),
    "forget": (
        "forget",
        "{folder}",
        "qd:1",
        "--collection",
        NAME,
        "--allow-writes",
        "--reason",
        "r",
        "--yes",
    ),
}


@pytest.mark.parametrize("args", COLLECTION_COMMANDS.values(), ids=COLLECTION_COMMANDS.keys())
def test_a_hostile_folder_and_collection_name_are_escaped_in_every_line(folder, args):
    run(*(str(folder) if a == "{folder}" else a for a in args))


def test_the_records_header_names_them_escaped_at_any_width(folder, monkeypatch):
    for columns in ("250", "80"):
        monkeypatch.setenv("COLUMNS", columns)
        out = "".join(run("records", folder, "--collection", NAME).split())
        assert out.startswith(f"2records·{escape_controls(folder.name)}/{SHOWN}")


def test_search_says_what_it_indexes_escaped(folder):
    out = run("search", folder, "alpha", "--collection", NAME)
    assert f"indexing {escape_controls(folder.name)}/{SHOWN} (Qdrant collection)" in out


def test_the_collection_picker_and_an_unknown_collection_are_one_escaped_line(folder):
    picked = run("records", folder, code=1)
    assert f"pick one with --collection NAME: {SHOWN} (2 points" in picked
    unknown = run("records", folder, "--collection", "nope", code=1)
    assert f"has no collection 'nope'; it holds: {SHOWN}" in unknown
    assert len(unknown.strip().splitlines()) == 1


def test_the_cache_folder_is_named_escaped(folder, hostile_cache):
    run("search", folder, "alpha", "--collection", NAME)
    listed = run("cache", "list")
    assert f"1 cached index in {escape_controls(str(hostile_cache / 'sources'))}" in listed
    assert escape_controls(str(folder)) in listed
    cleared = run("cache", "clear")
    assert cleared.startswith(f"removed 1 cached index from {escape_controls(str(hostile_cache))}")


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(CORPUS))
    return path


def test_a_hostile_database_file_name_is_escaped_in_every_line(tmp_path, corpus):
    db = tmp_path / f"memory{NAME}.db"
    shown = escape_controls(str(db))
    assert f"into {shown}" in run("ingest", corpus, "--db", db, "--embedder", "hash")
    assert f"records · {escape_controls(db.name)}" in run("records", db)
    assert f"compacted {shown}:" in run("compact", db)
    assert f"of {shown} with hash" in run("reindex", db, "--embedder", "hash")
    assert f"every vector of {shown}:" in run("reindex", db, "--embedder", "none")
    assert "rebuilt the full-text index" in run("reindex-text", db)
    assert "is already at schema" in run("migrate", db)
    run("search", db, "alpha")
    run("info", db)
    run("audit", db)
    run("check", db)


def test_demo_names_its_hostile_paths_escaped(tmp_path):
    db = tmp_path / f"demo{NAME}.db"
    assert f"demo database at {escape_controls(str(db))} " in run("demo", "--summary", "--db", db)
    out = tmp_path / f"walk{NAME}.json"
    assert f"walkthrough to {escape_controls(str(out))}" in run("demo", "--out", out)


def test_refusals_that_name_a_hostile_path_are_escaped(tmp_path, corpus):
    empty = tmp_path / f"empty{NAME}.db"
    empty.write_bytes(b"")
    assert escape_controls(str(empty)) in run("compact", empty, code=1)
    folder = tmp_path / f"dir{NAME}"
    folder.mkdir()
    refused = run("ingest", folder, "--db", tmp_path / "x.db", code=2)
    assert f"'{escape_controls(str(folder))}' is a directory" in refused
