"""mem0 pgvector fixtures, written by mem0's real ``PGVector`` class (mem0ai 2.x).

The payloads are mem0's own (``data``, ``hash``, ``text_lemmatized``, the session
ids, ``created_at``/``updated_at`` as UTC ISO text), with times pinned around the
suite's fixed ``NOW``; vectors are a deterministic ``HashEmbedder(8)``. mem0's
telemetry is off before mem0 is imported (it would try the network).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

os.environ["MEM0_TELEMETRY"] = "False"

from conftest import NOW  # noqa: E402

from memtui.core.embed import HashEmbedder  # noqa: E402

EMBEDDER = HashEmbedder(8)
MEM0_NOW = NOW.isoformat().replace("+00:00", "Z")


def memory_id(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"mem0-fixture/{name}"))


def record_id(name: str) -> str:
    return f"mem0:{memory_id(name)}"


# name, text, session ids, extra payload keys
MEMORIES: list[tuple[str, str, dict[str, str], dict[str, Any]]] = [
    ("paris", "Paris trip booked for June", {"user_id": "alice"}, {}),
    ("dark", "prefers dark mode in every editor", {"user_id": "alice", "agent_id": "helper"}, {}),
    ("billing", "works on the billing service in Go", {"user_id": "alice", "run_id": "r-1"}, {}),
    ("rome", "Rome trip with the family in May", {"user_id": "bob"}, {"topic": "travel"}),
    ("coffee", "drinks coffee black, no sugar", {"user_id": "bob", "agent_id": "helper"}, {}),
    ("token", "the staging API key is rotated monthly", {"user_id": "bob"}, {"api_key": "sk-zz"}),
    (
        "steps",
        "deploy: run the tests, tag, then push the image",
        {"agent_id": "deployer"},
        {"memory_type": "procedural_memory"},
    ),
    ("old", "passport renewal trip reminder, expired", {"user_id": "carol"}, {}),
    ("soon", "dentist trip next week, still live", {"user_id": "carol"}, {}),
    *(
        (f"bulk{n:02d}", f"bulk memory number {n} about coffee", {"user_id": "dave"}, {})
        for n in range(14)
    ),
]
EXPIRATION = {"old": "2026-11-29", "soon": "2026-11-30"}
"""``expiration_date`` of two memories: before the fixed today (expired), and today (live)."""


def at(n: int) -> str:
    """Memory n's time: ``NOW - (count - n) hours``, as mem0 writes it."""
    return (NOW - timedelta(hours=len(MEMORIES) - n)).isoformat()


def payload(n: int, name: str, text: str, ids: dict[str, str], extra: dict[str, Any]) -> dict:
    from mem0.utils.lemmatization import lemmatize_for_bm25

    out: dict[str, Any] = {
        **ids,
        **extra,
        "data": text,
        "hash": hashlib.md5(text.encode()).hexdigest(),
        "text_lemmatized": lemmatize_for_bm25(text),
        "created_at": at(n),
        "updated_at": at(n),
        "role": "user",
    }
    if name in EXPIRATION:
        out["expiration_date"] = EXPIRATION[name]
    return out


def embed(text: str) -> list[float]:
    return [float(v) for v in EMBEDDER([text])[0]]


def library(url: str, collection: str = "memories", *, hnsw: bool = True) -> Any:
    """mem0's own ``PGVector`` on ``url`` (8 dims)."""
    from mem0.vector_stores.pgvector import PGVector

    return PGVector(
        dbname=None,
        collection_name=collection,
        embedding_model_dims=8,
        user=None,
        password=None,
        host=None,
        port=None,
        diskann=False,
        hnsw=hnsw,
        connection_string=url,
    )


def write_collection(url: str, collection: str = "memories", memories: Any = None) -> Any:
    """``memories`` (default ``MEMORIES``) inserted by mem0's ``PGVector``; returns it."""
    rows = list(MEMORIES if memories is None else memories)
    store = library(url, collection)
    store.insert(
        vectors=[embed(text) for _, text, _, _ in rows],
        payloads=[payload(n, *row) for n, row in enumerate(rows)],
        ids=[memory_id(name) for name, *_ in rows],
    )
    return store


def write_telemetry(url: str) -> None:
    """mem0's ``mem0migrations`` table with its one ``user_identity`` row (as mem0 does)."""
    store = library(url, "mem0migrations", hnsw=False)
    user = str(uuid.uuid5(uuid.NAMESPACE_URL, "mem0-fixture/identity"))
    store.insert(
        vectors=[[0.1] * 8], payloads=[{"user_id": user, "type": "user_identity"}], ids=[user]
    )
    store.connection_pool.close()


def write_history(path: Path) -> Path:
    """mem0's ``history.db`` by its own ``SQLiteManager``: an ADD for every fixture memory,
    an UPDATE of ``dark``, and a deleted memory whose text the history still holds."""
    from mem0.memory.storage import SQLiteManager

    history = SQLiteManager(str(path))
    for n, (name, text, _, _) in enumerate(MEMORIES):
        history.add_history(
            memory_id(name), None, text, "ADD", created_at=at(n), actor_id=None, role="user"
        )
    history.add_history(
        memory_id("dark"),
        "prefers light mode",
        "prefers dark mode in every editor",
        "UPDATE",
        created_at=at(1),
        updated_at=at(2),
    )
    gone = memory_id("gone")
    history.add_history(gone, None, "the old office door code", "ADD", created_at=at(0))
    history.add_history(
        gone, "the old office door code", None, "DELETE", updated_at=at(1), is_deleted=1
    )
    history.close()
    return path


def sql(url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """One statement on ``url`` by a connection of its own (as another client would)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return list(cursor.fetchall()) if cursor.description else []
