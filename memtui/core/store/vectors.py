"""The vectors: the embedder that writes them (and the one the file records), storing
them as records are written, and recomputing them all."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

from memtui.core.embed import Embedder, EmbedderError, builtin_embedder, embedder_spec
from memtui.core.records import read_row_text
from memtui.core.store.audit import AuditLog
from memtui.core.store.connection import Progress
from memtui.core.store.errors import MemoryStoreError, _shown
from memtui.core.store.reads import RecordReads
from memtui.core.store.rows import pack_vector, unpack_vector
from memtui.core.store.schema import vector_triggers_off


class VectorWriter(AuditLog, RecordReads):
    """Embeds and stores vectors, and keeps the recorded embedder in step with them."""

    embedder: Embedder | None

    def _adopt_embedder(self, embedder: Embedder) -> None:
        """Write new records' vectors with ``embedder``.

        Refused when the file holds vectors of another embedder. Nothing is
        written here: the file records the embedder in the same transaction as
        the first vectors it writes (``_store_vectors``), so a write that fails
        leaves no embedder recorded for vectors that do not exist.
        """
        recorded = self.recorded_embedder()
        if recorded and (recorded["name"], recorded["dim"]) != (embedder.name, embedder.dim):
            if self.query("SELECT 1 FROM vectors LIMIT 1"):
                raise MemoryStoreError(
                    f"this database's vectors were written by {_shown(recorded['name'])} "
                    f"({recorded['dim']} dims), not {embedder.name} ({embedder.dim} dims); "
                    "re-index with that embedder (memtui reindex) before writing with it"
                )
        self.embedder = embedder

    def _recorded_builtin(self) -> Embedder | None:
        """The built-in embedder that wrote the file's vectors, to embed new records as
        the others are (None when the file has no vectors).

        Only a built-in (``hash-N``, MiniLM) with the recorded dimension: a plug-in named
        in the file is never imported (the file is untrusted input); a store
        on such a file writes new records without vectors until it is opened
        with that embedder (search reports them as ``vectors_missing``).
        """
        recorded = self.recorded_embedder()
        if recorded is None or not self.query("SELECT 1 FROM vectors LIMIT 1"):
            return None  # no vectors to keep company with
        try:
            builtin = builtin_embedder(recorded["name"])
        except EmbedderError:
            return None
        if builtin is None or (builtin.name, builtin.dim) != (recorded["name"], recorded["dim"]):
            return None
        return builtin

    def recorded_embedder(self) -> dict[str, Any] | None:
        """The embedder that wrote this file's vectors: ``{"name", "dim"}``, plus
        ``"spec"`` (the ``module:callable`` it was loaded with) for a plug-in;
        None when none is recorded. Text from the file: never import it."""
        rows = self.query(
            "SELECT key, value FROM meta "
            "WHERE key IN ('embedder_name', 'embedder_dim', 'embedder_spec')"
        )
        values = {k: v for k, v in rows}
        if "embedder_name" not in values:
            return None
        try:
            dim = int(values.get("embedder_dim", ""))
        except (TypeError, ValueError):
            raise MemoryStoreError(
                f"this database records embedder {_shown(str(values['embedder_name']))} with "
                f"dimension {_shown(str(values.get('embedder_dim')))!r}, not a whole number; "
                "re-index it (memtui reindex)"
            ) from None
        out: dict[str, Any] = {"name": str(values["embedder_name"]), "dim": dim}
        if values.get("embedder_spec"):
            out["spec"] = str(values["embedder_spec"])
        return out

    def vector_count(self) -> int:
        return self.query("SELECT count(*) FROM vectors")[0][0]

    def vector_of(self, record_id: int) -> list[float] | None:
        rows = self.query("SELECT vector FROM vectors WHERE record_id = ?", (int(record_id),))
        return unpack_vector(rows[0][0]) if rows else None

    def vectors_generation(self) -> int | None:
        """The vectors generation counter: it changes whenever any vector is written or deleted."""
        rows = self.query("SELECT value FROM meta WHERE key = 'vectors_generation'")
        return int(rows[0][0]) if rows else None

    def _store_vectors(self, items: Sequence[tuple[int, str]]) -> None:
        """Embed and store the vectors of ``items`` (``(record id, text)``); inside a write.

        The embedder is foreign code: anything it raises, or a result that is
        not one vector of ``dim`` finite numbers per text, becomes a
        ``MemoryStoreError`` (the transaction rolls back). The file records the
        embedder here, with its first vectors.
        """
        embedder = self.embedder
        assert embedder is not None
        name, dim = embedder.name, embedder.dim
        try:
            vectors = list(embedder([text for _, text in items]))
        except Exception as exc:
            raise MemoryStoreError(
                f"embedder {name} failed: {type(exc).__name__}: {exc}; nothing was written"
            ) from None
        if len(vectors) != len(items):
            raise MemoryStoreError(
                f"embedder {name} returned {len(vectors)} vectors for {len(items)} texts"
            )
        rows = []
        for (record_id, _), vector in zip(items, vectors, strict=True):
            try:
                size = len(vector)
                packed = pack_vector(vector) if size == dim else b""
                finite = math.isfinite(sum(vector))
            except (TypeError, struct.error, OverflowError):
                raise MemoryStoreError(
                    f"embedder {name} returned something other than a list of numbers"
                ) from None
            if size != dim:
                raise MemoryStoreError(
                    f"embedder {name} returned {size} values, not its declared {dim}"
                )
            if not finite:
                raise MemoryStoreError(f"embedder {name} returned a non-finite value")
            rows.append((record_id, packed))
        recorded = self.recorded_embedder()
        spec = embedder_spec(embedder)
        if recorded is None or (recorded["name"], recorded["dim"], recorded.get("spec")) != (
            name,
            dim,
            spec,
        ):
            self._set_embedder_meta(embedder)
        self._conn.executemany(
            "INSERT OR REPLACE INTO vectors (record_id, vector) VALUES (?, ?)", rows
        )

    def _set_embedder_meta(self, embedder: Embedder | None) -> None:
        """Record the embedder that writes the vectors: its name, dim, and a plug-in's spec."""
        self._conn.execute(
            "DELETE FROM meta WHERE key IN ('embedder_name', 'embedder_dim', 'embedder_spec')"
        )
        if embedder is None:
            return
        values = [("embedder_name", embedder.name), ("embedder_dim", str(embedder.dim))]
        spec = embedder_spec(embedder)
        if spec:
            values.append(("embedder_spec", spec))
        self._conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", values)

    def reindex_vectors(
        self,
        embedder: Embedder | None,
        *,
        operator: str | None = None,
        progress: Progress | None = None,
    ) -> int:
        """Recompute every record's vector with ``embedder`` (None drops them all); audited."""
        total = self.record_count()
        previous = self.embedder
        try:
            return self._reindex_locked(embedder, total, operator, progress)
        except BaseException:
            self.embedder = previous  # rolled back: the store writes as before
            raise

    def _reindex_locked(
        self,
        embedder: Embedder | None,
        total: int,
        operator: str | None,
        progress: Progress | None,
    ) -> int:
        with self._write(), vector_triggers_off(self._conn):
            self._conn.execute("DELETE FROM vectors")
            self.embedder = embedder
            self._set_embedder_meta(embedder)
            done = 0
            if embedder is not None:
                last = 0
                while True:
                    chunk = self.query(
                        "SELECT id, content FROM records WHERE id > ? ORDER BY id LIMIT 512",
                        (last,),
                    )
                    if not chunk:
                        break
                    self._store_vectors([(r[0], read_row_text(r[1])[0]) for r in chunk])
                    last = chunk[-1][0]
                    done += len(chunk)
                    if progress:
                        progress(done, total)
            self._drop_vector_cache(())
            self._append_audit(
                action="reindex",
                record_ids=[],
                operator=operator,
                details={
                    "count": done,
                    "embedder": embedder.name if embedder else None,
                    "dim": embedder.dim if embedder else None,
                },
            )
        return done

    def _drop_vector_cache(self, forgotten: Sequence[int]) -> bool | None:
        """Invalidate every cached copy of the vectors (memtui.core.vector_cache).

        Returns whether no cache file is left, or None when there was none to
        begin with (an in-memory or small store, or one never searched by vector).
        """
        from memtui.core import vector_cache

        had_files = bool(vector_cache.cache_files(self))
        gone = vector_cache.invalidate(self, forgotten, empty_now=False)
        return gone if had_files else None
