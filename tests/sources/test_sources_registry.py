"""The registry of store kinds: a new kind is one module plus one registry line."""

from __future__ import annotations

import ast
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memtui.cli import main
from memtui.sources import SourceError, open_source
from memtui.sources.base import Page, SourceRecord, TierFacet
from memtui.sources.foreign import ForeignSqliteSource
from memtui.sources.registry import REGISTRY
from memtui.sources.store_kind import OpenRequest, Probe, StoreKind

# ---------------------------------------------------------------- a tiny kind (its "module")


class NotesSource(ForeignSqliteSource):
    """A table ``tiny_notes(id, body)``: one record a row."""

    kind = "tiny-notes"
    kind_label = "tiny notes"
    tiers = ("note",)
    id_prefix = "note"

    def __init__(self, path: Path, *, shout: bool = False, **common: Any) -> None:
        self.shout = shout
        super().__init__(path, **common)

    @property
    def expiry_rule(self) -> str:
        return "no expiry"

    def _records(self) -> list[SourceRecord]:
        return [
            SourceRecord(
                id=f"note:{rid}",
                tier="note",
                record_type="note",
                content=body.upper() if self.shout else body,
                scope={},
                created_at=None,
                expires_at=None,
                state="live",
                metadata={},
            )
            for rid, body in self.query("SELECT id, body FROM tiny_notes ORDER BY id")
        ]

    def record_count(self) -> int:
        return len(self._records())

    def facets(self, filters: Any = None, *, include_hidden: bool = False) -> list[TierFacet]:
        return [TierFacet(tier="note", count=self.record_count(), scopes={})]

    def page(self, filters: Any = None, *, after: Any = None, limit: int = 50, **_: Any) -> Page:
        return Page(records=self._records()[:limit], next_cursor=None)

    def get(self, record_id: str) -> SourceRecord | None:
        return next((r for r in self._records() if r.id == record_id), None)

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        raise SourceError("tiny notes are read-only")


@dataclass(frozen=True)
class NotesOptions:
    shout: bool = False

    def given_flags(self) -> list[str]:
        return ["--shout"] if self.shout else []


def open_notes(probe: Probe, request: OpenRequest, options: NotesOptions) -> NotesSource:
    return NotesSource(probe.path, shout=options.shout, **request.foreign())


NOTES = StoreKind(
    "tiny-notes",
    "tiny notes",
    "tiny_notes(id, body)",
    lambda probe: {"id", "body"} <= probe.schema.get("tiny_notes", set()),
    open_notes,
    options=NotesOptions,
    options_apply_to="tiny notes stores",
)

# ---------------------------------------------------------------- the tests


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("XDG_CACHE_HOME", "XDG_DATA_HOME", "MEMTUI_CACHE_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    path = tmp_path / "notes.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE tiny_notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO tiny_notes (body) VALUES (?)", [("first",), ("second",)])
    conn.commit()
    conn.close()
    return path


def test_a_kind_registered_in_one_line_opens_through_open_source_and_info(notes):
    with pytest.raises(SourceError, match="not a memory store memtui recognizes"):
        open_source(notes)
    with REGISTRY.registered(NOTES):  # the one registry line
        with open_source(notes) as source:
            assert isinstance(source, NotesSource)
            assert [r.content for r in source.page().records] == ["first", "second"]
        with open_source(notes, shout=True) as source:  # its own option reaches it
            assert source.get("note:2").content == "SECOND"
        with open_source(notes, options={"tiny-notes": NotesOptions(shout=True)}) as source:
            assert source.get("note:1").content == "FIRST"
        with pytest.raises(SourceError, match="--collection applies to Qdrant stores"):
            open_source(notes, collection="x")
        result = CliRunner().invoke(main, ["info", str(notes), "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["kind"] == "tiny-notes" and data["counts"]
        formats = CliRunner().invoke(main, ["info", "--formats"]).output
        assert "  tiny notes: tiny_notes(id, body)\n" in formats
    assert REGISTRY.get("tiny-notes") is None


def test_options_of_a_kind_are_refused_on_a_store_of_another_kind(notes):
    with REGISTRY.registered(NOTES):
        preferences = Path(__file__).parent.parent / "fixtures" / "preferences.sqlite"
        with pytest.raises(SourceError, match="--shout applies to tiny notes stores; .* not one"):
            open_source(preferences, shout=True)
    with pytest.raises(TypeError, match="no store kind takes an option named 'shout'"):
        open_source(notes, shout=True)


def test_every_registry_entry_is_listed_by_info_formats():
    text = CliRunner().invoke(main, ["info", "--formats"]).output
    listed = json.loads(CliRunner().invoke(main, ["info", "--formats", "--json"]).output)
    names = [item["kind"] for item in listed]
    assert len(REGISTRY) >= 6
    for kind in REGISTRY:
        assert kind.name in names
        assert f"  {kind.label}: {kind.needs}\n" in text


def test_the_qdrant_package_imports_none_of_the_adapters_built_on_it():
    package = Path(__file__).parents[2] / "memtui" / "sources" / "qdrant"
    for module in package.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                assert not name.startswith(
                    ("memtui.sources.mem0", "memtui.sources.cyber_autoagent")
                ), (module.name, name)


def test_the_registry_says_which_options_name_a_store_without_a_path():
    """The commands ask the registry whether a PATH is needed: a server URL of a kind
    with a ``Remote`` names the store; a collection or a schema alone does not."""
    assert REGISTRY.remote_named({"qdrant_url": "http://qdrant.example:6333"}).name == "qdrant"
    assert REGISTRY.remote_named({"collection": "memories", "pg_schema": "agents"}) is None
    assert REGISTRY.remote_named({}) is None
    assert REGISTRY.remote_flags() == ["--qdrant-url URL for a Qdrant server"]


def test_a_command_with_neither_a_path_nor_a_server_names_both():
    result = CliRunner().invoke(
        main, ["forget-scope", "--engagement", "acme", "--reason", "wrong engagement"]
    )
    assert result.exit_code == 2
    assert "give a store PATH (or --qdrant-url URL for a Qdrant server)" in result.output
