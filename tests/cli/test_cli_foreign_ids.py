"""Ids as users know them: a LangGraph ``namespace/key`` or a bare mem0/Qdrant point id
given to ``forget`` is refused with the id memtui uses for it, and nothing changes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import one_error_line
from fixtures.qdrant_support import (
    MEM0_IDS,
    copy_mem0_store,
    make_cyber_folder,
    pid,
    record_id,
    tree_bytes,
)
from fixtures.sources_support import LANGGRAPH, LETTA, copy_fixture

from memtui.cli import main
from memtui.sources.base import encode_id


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMTUI_NOW", "2026-11-30T12:00:30Z")
    monkeypatch.delenv("MEM0_DIR", raising=False)


def forget(store, record_id: str):
    return CliRunner().invoke(
        main, ["forget", str(store), record_id, "--reason", "r", "--allow-writes", "--yes"]
    )


@pytest.mark.parametrize(
    ("typed", "key"),
    [
        ("memories.user-1/pref-color", "pref-color"),
        ("memories/user-1/pref-color", "pref-color"),  # the namespace tuple's labels
        ("memories.user-1/trip/2026:paris", "trip/2026:paris"),  # a key with a slash
    ],
)
def test_a_langgraph_namespace_and_key_is_answered_with_its_id(tmp_path, typed, key):
    path = copy_fixture(LANGGRAPH, tmp_path)
    before = path.read_bytes()
    line = one_error_line(forget(path, typed))
    assert line == (
        f"Error: no record with id {typed}; memtui's id of item {key!r} in namespace "
        f"'memories.user-1' is {encode_id('lg', 'memories.user-1', key)}"
    )
    assert path.read_bytes() == before


def test_a_langgraph_id_of_no_item_says_what_ids_look_like(tmp_path):
    path = copy_fixture(LANGGRAPH, tmp_path)
    line = one_error_line(forget(path, "nowhere/nothing"))
    assert line.endswith("a LangGraph item's id is lg:NAMESPACE/KEY, as `memtui records` lists it")


def test_a_bare_mem0_point_id_is_answered_with_its_id(tmp_path):
    folder = copy_mem0_store(tmp_path / "store")
    before = tree_bytes(folder.parent)
    bare = MEM0_IDS["seat"].removeprefix("qd:")
    line = one_error_line(forget(folder, bare))
    assert (
        line
        == f"Error: no record with id {bare}; memtui's id of point {bare} is {MEM0_IDS['seat']}"
    )
    assert tree_bytes(folder.parent) == before


def test_a_bare_qdrant_point_id_is_answered_with_its_id(tmp_path):
    folder = make_cyber_folder(tmp_path / "qdrant", web_cache=False)
    braced = "{" + pid(2).upper() + "}"  # a UUID as some tools print it
    line = one_error_line(forget(folder, braced))
    assert line.endswith(f"memtui's id of point {braced} is {record_id(2)}")


def test_a_bare_letta_passage_id_is_answered_with_its_id(tmp_path):
    path = copy_fixture(LETTA, tmp_path)
    bare = "passage-00000000-0000-4000-8000-000000000001"
    line = one_error_line(forget(path, bare))
    assert line.endswith(f"memtui's id of {bare} is archival:{bare}")
