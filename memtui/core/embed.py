"""Embedders: the protocol, the built-in hashing embedder, and name resolution.

The built-in embedder hashes words into a fixed-size vector. It keeps
vocabulary, not meaning: "sqli" and "sql injection" share nothing unless they
share words. It exists so that both search lanes run offline, deterministically,
with no model download; plug in a real model with ``module:callable``.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable


class EmbedderError(Exception):
    """An embedder could not be found, loaded or run."""


@runtime_checkable
class Embedder(Protocol):
    """A callable from texts to float vectors, with a stable name and dimension."""

    name: str
    dim: int

    def __call__(self, texts: Sequence[str]) -> list[list[float]]: ...


_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Deterministic word-hashing embedder (keeps vocabulary, not meaning).

    Each lowercased word is hashed to one of ``dim`` buckets, the counts are
    summed and the vector is L2-normalized. Texts without words map to the zero
    vector. Buckets are unsigned: with signed hashing two colliding words of one
    text cancel out and unrelated texts get negative cosines; here every cosine
    is in [0, 1] and 0 means "no word (or bucket) in common".
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise EmbedderError(f"hash embedder dimension must be at least 8, got {dim}")
        self.dim = dim
        self.name = f"hash-{dim}"

    def _bucket(self, word: str) -> int:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self.dim

    def embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for word in _WORD.findall(text.lower()):
            vector[self._bucket(word)] += 1.0
        norm = math.sqrt(sum(v * v for v in vector))
        if norm:
            vector = [v / norm for v in vector]
        return vector

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_one(text) for text in texts]

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"


DEFAULT_EMBEDDER_NAME = "hash-256"


def resolve_embedder(name: str | None) -> Embedder | None:
    """Turn an embedder name into an embedder.

    ``none`` (or None) means no embedder; ``hash`` or ``hash-N`` is the built-in
    hashing embedder; ``module:callable`` imports ``callable`` from ``module``:
    an object with ``name`` and ``dim`` is used as is, anything else callable is
    called with no arguments to build one.
    """
    if name is None or name.strip().lower() in ("", "none"):
        return None
    name = name.strip()
    if name == "hash":
        return HashEmbedder()
    match = re.fullmatch(r"hash-(\d+)", name)
    if match:
        return HashEmbedder(int(match.group(1)))
    if ":" not in name:
        raise EmbedderError(
            f"unknown embedder {name!r}; use 'none', 'hash', 'hash-N' or 'module:callable'"
        )
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EmbedderError(f"cannot import embedder module {module_name!r}: {exc}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise EmbedderError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not _is_embedder(obj):
        if not callable(obj):
            raise EmbedderError(f"{name!r} is neither an embedder nor a factory of one")
        try:
            obj = obj()
        except Exception as exc:
            raise EmbedderError(f"building embedder {name!r} failed: {exc}") from None
    if not _is_embedder(obj):
        raise EmbedderError(f"{name!r} did not give an embedder (needs name, dim and a call)")
    return obj


def _is_embedder(obj: object) -> bool:
    return (
        callable(obj)
        and isinstance(getattr(obj, "name", None), str)
        and isinstance(getattr(obj, "dim", None), int)
    )
