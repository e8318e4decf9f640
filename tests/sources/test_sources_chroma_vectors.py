"""The vector lane of a Chroma collection whose queue Chroma purged: the vectors read from
its HNSW segment's files (the id map read without unpickling), checked against what
chromadb itself returns, before and after chromadb's and memtui's own changes; damaged
or hostile files turn the lane off with a one-line reason and run nothing."""

from __future__ import annotations

import pickle
import shutil
import sqlite3
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import fixed_clock
from fixtures.chroma_support import (
    LANE_COLLECTION,
    LANE_COUNT,
    ChromaScaledEmbedding,
    lane_text,
    make_lane_folder,
    quiet_settings,
    tree_digest,
)

from memtui.cli import main
from memtui.core import vector_cache
from memtui.core.embed import HashEmbedder
from memtui.sources import open_source
from memtui.sources.chroma.segment import read_segment

DIM = 8


@pytest.fixture
def lane(tmp_path) -> Path:
    return make_lane_folder(tmp_path / "store" / "chroma")


def segment_of(folder: Path) -> Path:
    return next(p for p in folder.iterdir() if (p / "index_metadata.pickle").is_file())


def client_of(folder: Path):
    import chromadb

    return chromadb.PersistentClient(path=str(folder), settings=quiet_settings())


def chromadb_vectors(collection) -> dict[str, np.ndarray]:
    got = collection.get(include=["embeddings"])
    return {
        f"chroma:{i}": np.asarray(v, dtype=np.float32)
        for i, v in zip(got["ids"], got["embeddings"], strict=True)
    }


def vectors_from_a_copy(folder: Path, tmp_path: Path) -> dict[str, np.ndarray]:
    """What chromadb returns, from a copy (opening a folder with chromadb rewrites it)."""
    copy = tmp_path / "chromadb-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(folder, copy)
    client = client_of(copy)
    try:
        return chromadb_vectors(client.get_collection(LANE_COLLECTION, embedding_function=None))
    finally:
        client.close()


def memtui_vectors(folder: Path) -> dict[str, np.ndarray]:
    with open_source(folder) as source:
        assert "vectors" in source.capabilities, source.vector_note()
        return {k: np.frombuffer(v, "<f4") for k, v in source.cache_vectors().items()}


def assert_same_vectors(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray]) -> None:
    assert sorted(ours) == sorted(theirs)
    worst = max(float(np.abs(ours[k] - theirs[k]).max()) for k in theirs)
    assert worst <= 1e-6


def test_the_segments_vectors_are_chromadbs_and_reading_them_changes_no_byte(lane, tmp_path):
    conn = sqlite3.connect(f"file:{lane / 'chroma.sqlite3'}?mode=ro", uri=True)
    kept = conn.execute("SELECT count(*) FROM embeddings_queue").fetchone()[0]
    conn.close()
    assert kept < 10  # Chroma purged the queue: the vectors are in the HNSW files only
    theirs = vectors_from_a_copy(lane, tmp_path)
    assert len(theirs) == LANE_COUNT
    norms = [float(np.linalg.norm(v)) for v in theirs.values()]
    assert max(norms) > 2  # not unit vectors: the cosine index's norms were applied
    before = tree_digest(lane)
    assert_same_vectors(memtui_vectors(lane), theirs)
    with open_source(lane, clock=fixed_clock) as source:
        assert not any("keyword-only" in note for note in source.summary().notes)
        source.search(lane_text(3), embedder=HashEmbedder(DIM))
        list(source.iter_records())
    assert tree_digest(lane) == before


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_the_breakdown_recomputes_each_cosine_from_chromadbs_vector(lane, tmp_path):
    theirs = vectors_from_a_copy(lane, tmp_path)
    query = lane_text(17)
    embedder = HashEmbedder(DIM)
    q = embedder.embed_one(query)
    with open_source(lane) as source:
        response = source.search(query, embedder=embedder, limit=5)
    assert response.trace.fallback is None
    assert response.results[0].id == "chroma:v0017"
    for result in response.results:
        trace = result.trace
        assert trace.vector.raw == pytest.approx(cosine(q, theirs[result.id]), abs=1e-6)
        assert result.score == pytest.approx(
            0.3 * trace.keyword.normalized + 0.7 * trace.vector.normalized, abs=1e-9
        )


def change_below_the_threshold(collection) -> None:
    collection.delete(ids=[f"v{n:04d}" for n in range(0, 7)])
    collection.update(ids=[f"v{n:04d}" for n in range(10, 15)], documents=["changed"] * 5)
    collection.update(ids=["v0020"], metadatas=[{"user_id": "moved"}])  # no new vector
    collection.upsert(ids=["v0030", "w0001"], documents=["upserted old", "upserted new"])
    collection.add(ids=["w0002", "w0003"], documents=["added two", "added three"])


def change_above_the_threshold(collection) -> None:
    collection.delete(ids=[f"v{n:04d}" for n in range(0, 1100)])
    collection.update(ids=[f"v{n:04d}" for n in range(1200, 1210)], documents=["later"] * 10)
    collection.add(ids=[f"v{n:04d}" for n in range(0, 5)], documents=["back again"] * 5)


@pytest.mark.parametrize("change", [change_below_the_threshold, change_above_the_threshold])
def test_after_chromadbs_deletes_and_updates_the_vectors_still_match(lane, change):
    client = client_of(lane)
    try:
        collection = client.get_collection(
            LANE_COLLECTION, embedding_function=ChromaScaledEmbedding()
        )
        change(collection)
        theirs = chromadb_vectors(collection)
    finally:
        client.close()
    if change is change_above_the_threshold:  # persisted: the deletes are marks in the files
        assert read_segment(segment_of(lane), DIM, "cosine").deleted >= 1000
    assert_same_vectors(memtui_vectors(lane), theirs)


def test_after_memtuis_forget_chromadb_works_and_the_lane_still_matches(lane, tmp_path):
    with open_source(lane, allow_writes=True, clock=fixed_clock) as source:
        source.search(lane_text(3), embedder=HashEmbedder(DIM))  # the cache holds vectors
        outcome = source.forget("chroma:v0003", reason="user asked", operator="ana")
        assert outcome.verified, outcome
        response = source.search(lane_text(4), embedder=HashEmbedder(DIM))
        assert response.trace.fallback is None and response.results[0].id == "chroma:v0004"
    ours = memtui_vectors(lane)
    assert "chroma:v0003" not in ours and len(ours) == LANE_COUNT - 1
    assert_same_vectors(ours, vectors_from_a_copy(lane, tmp_path))
    client = client_of(lane)
    try:
        collection = client.get_collection(
            LANE_COLLECTION, embedding_function=ChromaScaledEmbedding()
        )
        assert collection.count() == LANE_COUNT - 1
        found = collection.query(query_texts=[lane_text(9)], n_results=3)
        assert len(found["ids"][0]) == 3 and found["distances"][0][0] == pytest.approx(0, abs=1e-5)
    finally:
        client.close()


def test_a_document_chromadb_deletes_between_two_searches_is_not_in_the_second(lane):
    """The index keeps its vector matrix between searches (checked once per state of the
    file, its pool not looked up again): chromadb's delete, by another client while the
    source is open, is seen by the next search."""
    embedder = HashEmbedder(DIM)
    with open_source(lane, clock=fixed_clock) as source:
        first = source.search(lane_text(21), embedder=embedder, limit=5)
        assert first.trace.fallback is None and first.results[0].id == "chroma:v0021"
        assert vector_cache.load(source.index.store()).rows_recorded is True
        client = client_of(lane)
        try:
            collection = client.get_collection(
                LANE_COLLECTION, embedding_function=ChromaScaledEmbedding()
            )
            collection.delete(ids=["v0021"])
            collection.update(ids=["v0022"], metadatas=[{"user_id": "moved"}])
        finally:
            client.close()
        second = source.search(lane_text(21), embedder=embedder, limit=5)
        assert second.trace.fallback is None
        assert "chroma:v0021" not in {r.id for r in second.results}
        moved = source.search(lane_text(22), embedder=embedder, filters={"user_id": "moved"})
        assert [r.id for r in moved.results] == ["chroma:v0022"]


# -- hostile and damaged files


class WritesWhenBuilt:
    """Unpickled, its state would be set by ``__setstate__``: which writes a file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __setstate__(self, state: dict) -> None:
        Path(state["marker"]).write_text("ran")


class OpensWhenBuilt:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))  # unpickled: creates the file


def real_map(lane: Path) -> dict[str, int]:
    """The id map as Chroma wrote it (read by memtui's reader: nothing is unpickled)."""
    from memtui.sources.chroma.segment import read_id_map

    return read_id_map(segment_of(lane) / "index_metadata.pickle", LANE_COUNT)


@pytest.mark.parametrize(
    ("payload", "opcode"),
    [(WritesWhenBuilt, "GLOBAL"), (OpensWhenBuilt, "GLOBAL"), (None, "REDUCE")],
)
def test_a_pickle_that_names_code_is_refused_and_runs_nothing(lane, tmp_path, payload, opcode):
    marker = tmp_path / "ran"
    id_map = segment_of(lane) / "index_metadata.pickle"
    if payload is None:  # a REDUCE of whatever is on the stack, no class named
        hostile = b"\x80\x03}(X\x0b\x00\x00\x00id_to_label}X\x01\x00\x00\x00xN)Ru."
    else:
        value = {"id_to_label": real_map(lane), "x": payload(str(marker))}
        hostile = pickle.dumps(value, protocol=3)
    id_map.write_bytes(hostile)
    with open_source(lane) as source:
        assert "vectors" not in source.capabilities
        note = source.vector_note() or ""
        assert f"index_metadata.pickle refused: opcode {opcode} at byte" in note
        assert note.endswith("search is keyword-only")
        response = source.search(lane_text(5), embedder=HashEmbedder(DIM))
        assert f"opcode {opcode}" in (response.trace.fallback or "")
        assert response.results[0].id == "chroma:v0005"  # the keyword lane still ranks
    assert not marker.exists()


def header_field(lane: Path, offset: int, fmt: str, value) -> None:
    path = segment_of(lane) / "header.bin"
    raw = bytearray(path.read_bytes())
    struct.pack_into(fmt, raw, offset, value)
    path.write_bytes(bytes(raw))


def element_bytes(lane: Path, element: int, offset: int, data: bytes) -> None:
    path = segment_of(lane) / "data_level0.bin"
    raw = bytearray(path.read_bytes())
    start = element * (4 + 4 * 32 + 4 * DIM + 8) + offset
    raw[start : start + len(data)] = data
    path.write_bytes(bytes(raw))


def truncate(lane: Path, name: str, keep: float) -> None:
    path = segment_of(lane) / name
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])


def rewrite_map(lane: Path, change) -> None:
    id_map = real_map(lane)
    change(id_map)
    (segment_of(lane) / "index_metadata.pickle").write_bytes(
        pickle.dumps({"id_to_label": id_map}, protocol=3)
    )


DAMAGE = {
    "data truncated": (lambda f: truncate(f, "data_level0.bin", 0.5), "(truncated)"),
    "count that lies": (lambda f: header_field(f, 20, "<Q", 1 << 40), "elements in room for"),
    "huge count and room": (
        lambda f: (header_field(f, 12, "<Q", 1 << 41), header_field(f, 20, "<Q", 1 << 40)),
        "(truncated)",
    ),
    "another dimension": (lambda f: header_field(f, 36, "<Q", 132 + 4 * 9), "9-dim vectors"),
    "element size": (lambda f: header_field(f, 28, "<Q", 999), "an element is 999 bytes"),
    "version": (lambda f: header_field(f, 0, "<i", 2), "has version 2"),
    "short header": (lambda f: truncate(f, "header.bin", 0.99), "is 99 bytes, not 100"),
    "long header": (
        lambda f: (segment_of(f) / "header.bin").write_bytes(b"\x01" + b"\0" * (8 << 20)),
        "header.bin is longer, not 100 bytes",
    ),
    "maxM0": (lambda f: header_field(f, 68, "<Q", 0), "maxM0 is 0"),
    "too many links": (lambda f: element_bytes(f, 3, 0, b"\xff\x00"), "more links than maxM0"),
    "not unit": (lambda f: element_bytes(f, 2, 132, struct.pack("<f", 9.0)), "not unit length"),
    "norm not finite": (
        lambda f: (segment_of(f) / "length.bin").write_bytes(b"\x00\x00\xc0\x7f" * LANE_COUNT),
        "not all finite numbers",
    ),
    "norms truncated": (lambda f: truncate(f, "length.bin", 0.5), "650 norm(s)"),
    "map missing": (lambda f: (segment_of(f) / "index_metadata.pickle").unlink(), "is missing"),
    "map oversized": (
        lambda f: (segment_of(f) / "index_metadata.pickle").write_bytes(b"\0" * (2 << 20)),
        "not read",
    ),
    "map not a pickle": (
        lambda f: (segment_of(f) / "index_metadata.pickle").write_bytes(b"\x80\x03}(X\xff"),
        "not a well-formed pickle",
    ),
    "map of laughs": (
        lambda f: (segment_of(f) / "index_metadata.pickle").write_bytes(
            pickle.dumps({"id_to_label": {}, "x": [[] for _ in range(20000)]}, protocol=3)
        ),
        "builds more than",
    ),
    "label not a number": (
        lambda f: rewrite_map(f, lambda m: m.update({"v0001": "one"})),
        "not a document id to a label",
    ),
    "one label twice": (
        lambda f: rewrite_map(f, lambda m: m.update({"v0001": m["v0002"]})),
        "one label to two documents",
    ),
    "no id map in it": (
        lambda f: (segment_of(f) / "index_metadata.pickle").write_bytes(pickle.dumps([1, 2])),
        "holds no id_to_label map",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_segment_files_mean_keyword_only_with_the_reason(lane, damage):
    harm, reason = DAMAGE[damage]
    harm(lane)
    with open_source(lane) as source:
        assert "vectors" not in source.capabilities
        note = source.vector_note() or ""
        assert note.startswith(f"{LANE_COUNT - 1} of {LANE_COUNT} live document(s) have no vector")
        assert "its HNSW segment was refused" in note and reason in note, note
        response = source.search(lane_text(6), embedder=HashEmbedder(DIM))
        assert reason in (response.trace.fallback or "")
        assert response.results[0].id == "chroma:v0006"


def test_a_label_the_segment_lacks_leaves_that_document_without_a_vector(lane):
    rewrite_map(lane, lambda m: m.update({"v0001": 1 << 50}))
    with open_source(lane) as source:
        note = source.vector_note() or ""
    assert note.startswith("1 of 1300 live document(s) have no vector memtui can read")
    assert "neither its HNSW segment's files nor embeddings_queue hold it" in note


def test_info_names_the_reason_without_a_traceback(lane):
    truncate(lane, "data_level0.bin", 0.5)
    result = CliRunner().invoke(main, ["info", str(lane)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # the note as one line, however it is wrapped
    assert "Traceback" not in said and said.count("search is keyword-only") == 1
    assert (
        "1299 of 1300 live document(s) have no vector memtui can read (its HNSW segment was "
        "refused: data_level0.bin holds 650 whole element(s); header.bin counts 1300 "
        "(truncated)): search is keyword-only"
    ) in said


def test_asking_whether_an_action_applies_reads_no_vector_file(lane, monkeypatch):
    """The app asks the source which keys apply on its UI thread: that must not wait for
    the HNSW files to be read (a second at 100,000 documents); only "vectors" does."""
    import memtui.sources.chroma.read as chroma_read

    def refuse(*_args, **_kwargs):
        raise AssertionError("the vectors were read")

    with open_source(lane, allow_writes=True) as source:
        monkeypatch.setattr(chroma_read, "read_collection_vectors", refuse)
        assert source.can("search") and source.can("audit") and source.can("forget")
        assert source.can("forget_scope") and not source.can("history")
        monkeypatch.undo()
        assert source.can("vectors") and "vectors" in source.capabilities


def test_a_segment_without_its_header_says_so(lane):
    (segment_of(lane) / "header.bin").unlink()
    with open_source(lane) as source:
        note = source.vector_note() or ""
    assert "its HNSW segment persisted vectors, but its header.bin is missing" in note
