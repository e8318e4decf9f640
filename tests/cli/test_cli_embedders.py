"""Plug-in embedders at the command line: a class is built, a failure is one line."""

import json
import sqlite3
import textwrap

import pytest
from conftest import SAMPLE_CORPUS, one_error_line

from memtui.cli import main


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    (tmp_path / "memtui_cli_plugins.py").write_text(
        textwrap.dedent(
            """
            class Tiny:
                name = "tiny-3"
                dim = 3

                def __call__(self, texts):
                    return [[float(len(t)), 1.0, 0.0] for t in texts]

            class Broken:
                name = "broken-3"
                dim = 3

                def __call__(self, texts):
                    raise RuntimeError("model weights missing")

            class Short:
                name = "short-3"
                dim = 3

                def __call__(self, texts):
                    return [[1.0] for t in texts]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "memtui_cli_plugins"


def meta(db):
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'embedder%'"))
    finally:
        conn.close()


def test_ingest_builds_a_class_embedder_and_records_its_spec(runner, tmp_path, plugins):
    db = tmp_path / "x.db"
    result = runner.invoke(
        main, ["ingest", str(SAMPLE_CORPUS), "--db", str(db), "--embedder", f"{plugins}:Tiny"]
    )
    assert result.exit_code == 0, result.output
    assert "ingested 72 records" in result.output
    assert meta(db) == {
        "embedder_name": "tiny-3",
        "embedder_dim": "3",
        "embedder_spec": f"{plugins}:Tiny",
    }


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("Broken", "embedder broken-3 failed: RuntimeError: model weights missing"),
        ("Short", "embedder short-3 returned 1 values, not its declared 3"),
    ],
)
def test_a_failing_embedder_is_one_line_and_writes_nothing(
    runner, tmp_path, plugins, attr, message
):
    fresh = tmp_path / "fresh.db"
    args = ["ingest", str(SAMPLE_CORPUS), "--db", str(fresh), "--embedder", f"{plugins}:{attr}"]
    line = one_error_line(runner.invoke(main, args))
    assert message in line
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("fresh")) == []

    # Into an existing database without vectors: no rows, no event, no embedder recorded.
    existing = tmp_path / "existing.db"
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps([{"tier": "working", "record_type": "note", "content": "a b"}]))
    ok = runner.invoke(main, ["ingest", str(notes), "--db", str(existing), "--embedder", "none"])
    assert ok.exit_code == 0, ok.output
    assert meta(existing) == {}
    args = ["ingest", str(SAMPLE_CORPUS), "--db", str(existing), "--embedder", f"{plugins}:{attr}"]
    line = one_error_line(runner.invoke(main, args))
    assert message in line
    assert meta(existing) == {}
    records = json.loads(runner.invoke(main, ["records", str(existing), "--all", "--json"]).output)
    assert len(records) == 1
    audit = json.loads(runner.invoke(main, ["audit", str(existing), "--json"]).output)
    assert [e["action"] for e in audit] == ["ingest"]
