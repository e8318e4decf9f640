"""The query's embedding, or the sentence saying why the vector lane cannot run."""

from __future__ import annotations

import math
from typing import Any

from memtui.core.embed import Embedder, EmbedderError, EmbedderUnavailable, builtin_embedder
from memtui.core.index import SearchIndex

QueryVector = tuple[list[float] | None, str | None, str | None]
"""``(vector, fallback reason, embedder name)``: a vector, or None and the reason."""


def embed_query(
    store: SearchIndex, query: str, embedder: Embedder | None, *, any_name: bool = False
) -> QueryVector:
    """The query's embedding, or None with the reason the vector lane cannot run.

    ``any_name``: the stored vectors are recorded under no embedder's name (a
    foreign store's own), so an embedder of their dimension is taken whatever
    its name.
    """
    recorded = store.recorded_embedder()
    if embedder is None:
        embedder, reason = _recorded_builtin(recorded)
        if embedder is None:
            return None, reason, None
    name = getattr(embedder, "name", repr(embedder))
    dim = getattr(embedder, "dim", None)
    if recorded is None:
        return (
            None,
            (
                f"this database has no stored vectors (no embedder recorded); "
                f"query embedder is {name} ({dim} dims)"
            ),
            name,
        )
    if recorded["dim"] != dim or (not any_name and recorded["name"] != name):
        return (
            None,
            (
                f"stored vectors were written by {recorded['name']} ({recorded['dim']} dims); "
                f"query embedder is {name} ({dim} dims)"
            ),
            name,
        )
    vector, reason = _checked_vector(embedder, name, query, recorded["dim"])
    return vector, reason, name


def _recorded_builtin(recorded: dict[str, Any] | None) -> tuple[Embedder | None, str | None]:
    """The embedder the file records when it is a built-in; else None and why not.

    The file names its embedder, but a file is untrusted input: only a built-in
    is taken from it. A plug-in (module:callable) would be code the file chose
    to run; the operator passes it explicitly instead.
    """
    if recorded is None:
        return None, "no embedder: this database has no vectors (none recorded) and none was given"
    recorded_name = _shown(recorded["name"])
    try:
        embedder = builtin_embedder(recorded["name"])
    except EmbedderUnavailable as exc:
        return None, f"the database's embedder {recorded_name} cannot run here: {exc}"
    except EmbedderError as exc:
        return None, f"the database's embedder {recorded_name} is refused: {exc}"
    if embedder is None:
        spec = recorded.get("spec")
        loaded = f" (loaded as {_shown(spec)})" if spec else ""
        return None, (
            f"the stored vectors were written by the plug-in embedder {recorded_name}"
            f"{loaded}; memtui never loads code that a database file names: pass it "
            f"yourself with --embedder {_shown(spec) if spec else 'module:callable'}"
        )
    return embedder, None


def _checked_vector(
    embedder: Embedder, name: str, query: str, dim: int
) -> tuple[list[float] | None, str | None]:
    """The query's vector from ``embedder``, or None and why it cannot be used."""
    try:
        vectors = embedder([query])
        vector = [float(v) for v in vectors[0]]
    except Exception as exc:  # an embedder is foreign code: any failure means fallback
        return None, f"embedder {name} failed: {type(exc).__name__}: {exc}"
    if len(vector) != dim:
        return None, (
            f"the query vector from {name} has {len(vector)} dims; stored vectors have {dim} dims"
        )
    if not all(math.isfinite(v) for v in vector):
        return None, f"embedder {name} returned a non-finite value for the query"
    if not any(vector):
        return None, (
            f"the query's embedding from {name} is all zeros (no words it knows), "
            "so cosine similarity is undefined"
        )
    return vector, None


def _shown(text: str, limit: int = 120) -> str:
    """Text read from the database file (an embedder's name), cut short for a message."""
    return text if len(text) <= limit else text[:limit] + "..."
