"""A Letta server's Postgres for the tests: Letta's own schema, rows as Letta writes them.

The schema is ``tests/fixtures/letta_server_schema.sql`` (Letta 0.16.8's ORM compiled
for PostgreSQL: every table, ``embedding vector(4096)``). The rows are inserted
with SQL the way Letta's passage manager writes them: the embedding (memtui's
deterministic ``hash-8``) zero-padded to 4096 components, ``embedding_config`` as
its ``EmbeddingConfig`` JSON, tags both in the passage's JSON ``tags`` and as
``passage_tags`` rows; two archives, two core blocks (the human block with three
``block_history`` rows) and two soft-deleted passages (Letta's API delete).
Times are pinned around the suite's ``NOW``.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from conftest import NOW

from memtui.core.embed import HashEmbedder

SCHEMA = Path(__file__).resolve().parents[2] / "fixtures" / "letta_server_schema.sql"
EMBEDDER = HashEmbedder(8)
STORED_DIMS = 4096
ORG = "org-00000000-0000-4000-8000-000000000000"
CONFIG = {
    "embedding_endpoint_type": "openai",
    "embedding_endpoint": None,
    "embedding_model": "hash-8",
    "embedding_dim": 8,
    "embedding_chunk_size": 300,
    "handle": None,
    "batch_size": 32,
    "azure_endpoint": None,
    "azure_version": None,
    "azure_deployment": None,
}
ARCHIVES = {
    "archive-00000000-0000-4000-8000-00000000000a": "research-notes",
    "archive-00000000-0000-4000-8000-00000000000b": "ops-runbooks",
}
RESEARCH, OPS = ARCHIVES

WORDS = (
    "amber basil cedar delta ember fjord garnet harbor indigo juniper kelp lumen maple "
    "nectar onyx pebble quartz raven sage tundra umber velvet willow yarrow"
).split()


def real_vector(text: str) -> list[float]:
    return [float(v) for v in EMBEDDER([text])[0]]


def bulk_texts(count: int, taken: list[str]) -> list[str]:
    """``count`` texts about coffee whose hash-8 vectors differ from each other and from
    those of ``taken``: a forget proves its vector's bytes gone only where no live
    passage holds an equal vector (an equal one is, by design, left unverified)."""
    seen = {tuple(real_vector(t)) for t in taken}
    out: list[str] = []
    for first in WORDS:
        for second in WORDS:
            text = f"bulk passage about coffee, {first} and {second}"
            vector = tuple(real_vector(text))
            if vector not in seen:
                seen.add(vector)
                out.append(text)
                if len(out) == count:
                    return out
    raise AssertionError("not enough distinct texts")


# (number, archive, text, tags, soft-deleted)
NAMED: list[tuple[int, str, str, list[str], bool]] = [
    (1, RESEARCH, "The user writes a compiler for a small functional language", ["project"], False),
    (2, RESEARCH, "Paris trip planned for the spring conference", ["travel", "project"], False),
    (3, OPS, "Restart the ingest worker with the drain flag before deploys", ["ops"], False),
    (4, OPS, "Old note: the staging password hint was zqxjvortex", ["ops", "secrets"], True),
    (5, RESEARCH, "Prefers answers in short bullet points", [], False),
    (6, RESEARCH, "Rome trip with the family booked for May", ["travel"], False),
    (7, OPS, "The billing database fails over to the eu-west replica", ["ops"], False),
    (8, RESEARCH, "Removed: the door code of the old office was 7734", [], True),
]
PASSAGES = NAMED + [
    (n, OPS if n % 3 == 0 else RESEARCH, text, ["bulk"], False)
    for n, text in enumerate(bulk_texts(24, [t for _, _, t, _, _ in NAMED]), start=9)
]
HUMAN = "block-00000000-0000-4000-8000-000000000001"
PERSONA = "block-00000000-0000-4000-8000-000000000002"
HISTORY = [
    "Name: Ada.",
    "Name: Ada. Works on compilers.",
    "Name: Ada. Works on compilers. Allergic to qwphlumbix pollen.",
]


def passage_id(number: int) -> str:
    return f"passage-00000000-0000-4000-8000-{number:012d}"


def record_id(number: int) -> str:
    return f"archival:{passage_id(number)}"


def padded(text: str) -> str:
    """The embedding as Letta's passage manager stores it: zero-padded to 4096 dims."""
    values = real_vector(text) + [0.0] * (STORED_DIMS - 8)
    return "[" + ",".join(repr(v) for v in values) + "]"


def at(number: int) -> Any:
    return NOW - timedelta(hours=len(PASSAGES) - number)


def write_letta(url: str) -> None:
    """The schema and the rows, in one transaction."""
    with psycopg.connect(url) as conn:
        conn.execute(SCHEMA.read_text(encoding="utf-8"))
        conn.execute(
            "INSERT INTO organizations (id, name, privileged_tools) VALUES (%s, 'fixture', false)",
            [ORG],
        )
        for archive_id, name in ARCHIVES.items():
            conn.execute(
                "INSERT INTO archives (id, name, vector_db_provider, organization_id, "
                "created_at, updated_at) VALUES (%s, %s, 'NATIVE', %s, %s, %s)",
                [archive_id, name, ORG, at(0), at(0)],
            )
        for number, archive, text, tags, deleted in PASSAGES:
            write_passage(conn, number, archive, text, tags, deleted)
        write_blocks(conn)


def write_passage(
    conn: Any, number: int, archive: str, text: str, tags: list[str], deleted: bool
) -> None:
    pid = passage_id(number)
    conn.execute(
        "INSERT INTO archival_passages (id, text, embedding_config, metadata_, tags, embedding, "
        "organization_id, archive_id, created_at, updated_at, is_deleted) "
        "VALUES (%s, %s, %s, %s, %s, %s::vector, %s, %s, %s, %s, %s)",
        [
            pid,
            text,
            json.dumps(CONFIG),
            json.dumps({"source": "conversation", "turn": number}),
            json.dumps(tags) if tags else None,
            padded(text),
            ORG,
            archive,
            at(number),
            at(number) + timedelta(minutes=30 if deleted else 0),
            deleted,
        ],
    )
    for index, tag in enumerate(tags):
        conn.execute(
            "INSERT INTO passage_tags (id, tag, passage_id, archive_id, organization_id, "
            "created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [f"passage-tag-{number}-{index}", tag, pid, archive, ORG, at(number), at(number)],
        )


def write_blocks(conn: Any) -> None:
    for block_id, label, value, version in (
        (HUMAN, "human", HISTORY[-1], 3),
        (PERSONA, "persona", "I am a patient assistant who answers in short bullet points.", 1),
    ):
        conn.execute(
            'INSERT INTO block (id, label, value, "limit", is_template, read_only, version, '
            "organization_id, metadata_, created_at, updated_at) "
            "VALUES (%s, %s, %s, 5000, false, false, %s, %s, '{}', %s, %s)",
            [block_id, label, value, version, ORG, at(0), at(0) + timedelta(hours=version)],
        )
    for sequence, value in enumerate(HISTORY, start=1):
        conn.execute(
            'INSERT INTO block_history (id, label, value, "limit", actor_type, actor_id, '
            "block_id, sequence_number, organization_id, created_at, updated_at) "
            "VALUES (%s, 'human', %s, 5000, 'letta_agent', %s, %s, %s, %s, %s, %s)",
            [
                f"block_hist-00000000-0000-4000-8000-{sequence:012d}",
                value,
                "agent-00000000-0000-4000-8000-000000000001",
                HUMAN,
                sequence,
                ORG,
                at(0) + timedelta(hours=sequence - 1),
                at(0) + timedelta(hours=sequence - 1),
            ],
        )


def sql(url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """One statement on ``url`` by a connection of its own (as another client would)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return list(cursor.fetchall()) if cursor.description else []
