"""Each live document's vector in a Chroma collection: the HNSW segment's, then the queue's.

Chroma writes every add, update, upsert and delete to ``embeddings_queue`` first;
its vector segment applies them and, every ``sync_threshold`` (1,000) changes,
persists its HNSW files (``memtui.sources.chroma.segment``) and records in
``max_seq_id`` the last queue row they hold, after which the queue rows every
segment has applied are purged. So the vectors of a collection are the
segment's persisted elements, overlaid by the queue rows after that ``seq_id``,
applied in order as Chroma applies them: an add of an id not present, an update
of one present (keeping its vector when the update carries none), an upsert,
a delete. When the segment's files cannot be read (refused with a reason, or
absent) the whole queue is applied alone, as before Chroma's first persist.

The lane is on only when every live document has a vector: a lane over some
documents would rank the others below every document it holds. Otherwise the
reason says how many lack one and why, and search is keyword-only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtui.sources.base import SourceError
from memtui.sources.chroma.hnsw import HEADER
from memtui.sources.chroma.segment import SegmentRefused, read_segment

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]

#: queue operations (chromadb's ``Operation``)
ADD, UPDATE, UPSERT, DELETE = 0, 1, 2, 3


@dataclass
class CollectionVectors:
    """What was read: whether every live document has a vector, the vectors (little-endian
    float32 by document id; None once handed over), else why not."""

    live: int = 0
    complete: bool = False
    vectors: dict[str, bytes] | None = None
    why: str | None = None
    from_segment: int = 0
    from_queue: int = 0
    details: dict[str, Any] = field(default_factory=dict)


def seq_number(value: Any) -> int:
    """A ``seq_id`` as Chroma stores it: an integer, or (older versions) big-endian bytes."""
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    return 0


def persisted_seq_id(query: Query, segment: str) -> int:
    """The last queue row the segment's files hold (``max_seq_id``); 0 when none is
    recorded (the whole queue is then applied: applying a row twice changes nothing)."""
    try:
        rows = query("SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (segment,))
    except SourceError:  # an older Chroma without the table
        return 0
    return seq_number(rows[0][0]) if rows else 0


def vector_segment(query: Query, collection_id: str) -> str | None:
    rows = query(
        "SELECT id FROM segments WHERE collection = ? AND scope = 'VECTOR'", (collection_id,)
    )
    return str(rows[0][0]) if rows else None


def read_collection_vectors(
    folder: Path,
    query: Query,
    *,
    collection_id: str,
    metadata_segment: str,
    dim: int,
    space: str,
) -> CollectionVectors:
    """The vectors of the collection's live documents (see the module's rule)."""
    live = [str(r[0]) for r in query(_LIVE_IDS, (metadata_segment,))]
    out = CollectionVectors(live=len(live))
    if not live:
        out.complete, out.vectors = True, {}
        return out
    state: dict[str, bytes | None] = {}
    after = 0
    refused = None
    segment = vector_segment(query, collection_id)
    if segment is None:
        refused = "the collection has no vector segment"
    elif (folder / segment / HEADER).is_file():
        try:
            read = read_segment(folder / segment, dim, space)
        except SegmentRefused as exc:
            refused = f"its HNSW segment was refused: {exc.reason}"
        except OSError as exc:
            refused = f"its HNSW segment's files cannot be read ({exc.strerror or exc})"
        else:
            raw = read.matrix.astype("<f4").tobytes()
            width = dim * 4
            state = {eid: raw[n * width : (n + 1) * width] for n, eid in enumerate(read.ids)}
            out.details = {"hnsw_deleted": read.deleted, "hnsw_unmapped": read.unmapped}
            after = persisted_seq_id(query, segment)
    elif persisted_seq_id(query, segment):
        refused = f"its HNSW segment persisted vectors, but its {HEADER} is missing"
    out.from_segment = len(state)
    out.from_queue = _apply_queue(state, query(_QUEUE, (f"%/{collection_id}", after)), dim)
    vectors = {eid: vector for eid in live if (vector := state.get(eid)) is not None}
    missing = len(live) - len(vectors)
    if missing:
        where = refused or "neither its HNSW segment's files nor embeddings_queue hold it"
        out.why = (
            f"{missing} of {len(live)} live document(s) have no vector memtui can read ({where})"
        )
        return out
    out.complete, out.vectors = True, vectors
    return out


_LIVE_IDS = "SELECT embedding_id FROM embeddings WHERE segment_id = ?"
_QUEUE = (
    "SELECT operation, id, vector, encoding FROM embeddings_queue "
    "WHERE topic LIKE ? AND seq_id > ? ORDER BY seq_id"
)


def _apply_queue(state: dict[str, bytes | None], rows: Sequence[tuple[Any, ...]], dim: int) -> int:
    """Apply the queue's rows to ``state`` (id to vector, None: present without one) as
    Chroma's segment does; how many rows were applied."""
    applied = 0
    for operation, eid, vector, encoding in rows:
        eid = str(eid)
        blob = _float32(vector, encoding, dim)
        if operation == DELETE:
            state.pop(eid, None)
        elif operation == ADD and eid not in state:
            state[eid] = blob
        elif operation == UPDATE and eid in state and blob is not None:
            state[eid] = blob
        elif operation == UPSERT:
            state[eid] = blob if blob is not None else state.get(eid)
        else:
            continue
        applied += 1
    return applied


def _float32(vector: Any, encoding: Any, dim: int) -> bytes | None:
    """A queue row's vector when it is ``dim`` little-endian float32 values."""
    if not isinstance(vector, bytes) or len(vector) != dim * 4:
        return None
    if encoding is not None and str(encoding).upper() != "FLOAT32":
        return None
    return vector
