"""Embedders: the protocol, the built-in hashing embedder, and name resolution.

The built-in embedder hashes words into a fixed-size vector. It keeps
vocabulary, not meaning: "sqli" and "sql injection" share nothing unless they
share words. It exists so that both search lanes run offline, deterministically,
with no model download. The built-in ``minilm`` (all-MiniLM-L6-v2, the ``semantic``
extra, ``memtui.core.semantic``) keeps meaning; any other model plugs in with
``module:callable``.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from memtui.core.semantic import MiniLMEmbedder, is_minilm_name, unavailable_reason


class EmbedderError(Exception):
    """An embedder could not be found, loaded or run."""


class EmbedderUnavailable(EmbedderError):
    """A built-in embedder whose packages are not installed (the message says which)."""


@runtime_checkable
class Embedder(Protocol):
    """A callable from texts to float vectors, with a stable name and dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def __call__(self, texts: Sequence[str]) -> list[list[float]]: ...


_WORD = re.compile(r"\w+", re.UNICODE)

HASH_MAX_DIM = 16384
"""The largest hash embedder: 64 KiB a vector. A name such as ``hash-100000000``
(from a hostile file, say) would otherwise allocate gigabytes."""


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
        if dim > HASH_MAX_DIM:
            raise EmbedderError(
                f"hash embedder dimension must be at most {HASH_MAX_DIM}, got {dim} "
                "(more buckets only cost memory: a word hashes to one of them either way)"
            )
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

_HASH_NAME = re.compile(r"hash(?:-(\d+))?")


class LoadedEmbedder:
    """A plug-in embedder as ``resolve_embedder`` loaded it, with the spec it came from.

    Calls, ``name``, ``dim`` and every other attribute are the plug-in's own;
    ``spec`` (``module:callable``) is what the store records beside the
    embedder's name, so that a later search can tell the operator which
    ``--embedder`` wrote the vectors (a file's spec is never imported).
    """

    def __init__(self, inner: Embedder, spec: str) -> None:
        self.inner = inner
        self.spec = spec

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner(texts)

    def __getattr__(self, attr: str) -> Any:
        if attr == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def __repr__(self) -> str:
        return f"LoadedEmbedder({self.spec!r}, name={self.name!r}, dim={self.dim})"


def embedder_spec(embedder: object) -> str | None:
    """The ``module:callable`` a plug-in embedder was loaded with; None for any other."""
    return embedder.spec if isinstance(embedder, LoadedEmbedder) else None


def builtin_embedder(name: str) -> HashEmbedder | MiniLMEmbedder | None:
    """The built-in embedder called ``name``, or None for any other name: ``hash`` or
    ``hash-N``, or ``minilm`` (also by the name it records, ``all-MiniLM-L6-v2``, any
    case). Imports nothing a name chooses (MiniLM's model loads from its own package
    on first use): safe on a name read from a database file. Raises ``EmbedderError``
    for a hash dimension out of range, ``EmbedderUnavailable`` when MiniLM's packages
    are not installed."""
    if is_minilm_name(name):
        reason = unavailable_reason()
        if reason is not None:
            raise EmbedderUnavailable(reason)
        return MiniLMEmbedder()
    match = _HASH_NAME.fullmatch(name.strip())
    if match is None:
        return None
    digits = match.group(1)
    if digits is None:
        return HashEmbedder()
    if len(digits) > len(str(HASH_MAX_DIM)) + 1:  # no giant int() of hostile text
        raise EmbedderError(
            f"hash embedder dimension must be at most {HASH_MAX_DIM}, got {digits[:12]}..."
        )
    return HashEmbedder(int(digits))


def resolve_embedder(name: str | None) -> Embedder | None:
    """Turn an embedder name, given by the operator, into an embedder.

    ``none`` (or None) means no embedder; ``hash`` or ``hash-N`` is the built-in
    hashing embedder (8 <= N <= ``HASH_MAX_DIM``); ``minilm`` is all-MiniLM-L6-v2
    (the ``semantic`` extra); ``module:callable`` imports
    ``callable`` from ``module`` and runs code: only for a name the operator
    typed, never one read from a file (``builtin_embedder`` is for those). An
    instance with ``name``, ``dim`` and a call is used as it is; a class, or
    any other callable, is called with no arguments to build one, and what it
    builds must be such an instance. A plug-in comes back as a
    ``LoadedEmbedder`` that remembers its spec.
    """
    if name is None or name.strip().lower() in ("", "none"):
        return None
    name = name.strip()
    builtin = builtin_embedder(name)
    if builtin is not None:
        return builtin
    if ":" not in name:
        raise EmbedderError(
            f"unknown embedder {name!r}; use 'none', 'hash', 'hash-N', 'minilm' "
            "or 'module:callable'"
        )
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EmbedderError(f"cannot import embedder module {module_name!r}: {exc}") from None
    except (Exception, SystemExit) as exc:
        raise EmbedderError(
            f"importing embedder module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise EmbedderError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not _is_embedder(obj):
        if not callable(obj):
            raise EmbedderError(f"{name!r} is neither an embedder nor a factory of one")
        try:
            obj = obj()
        except (Exception, SystemExit) as exc:
            raise EmbedderError(
                f"building embedder {name!r} failed: {type(exc).__name__}: {exc}"
            ) from None
    if not _is_embedder(obj):
        raise EmbedderError(
            f"{name!r} did not give an embedder (needs an object with a text name, "
            "a whole-number dim of at least 1 and a call from texts to vectors)"
        )
    return LoadedEmbedder(obj, name)


def _is_embedder(obj: object) -> bool:
    """A ready embedder: an instance (not a class, whose attributes may be class-level)
    that can be called, with a non-empty text name and a whole-number dim >= 1."""
    if isinstance(obj, type) or not callable(obj):
        return False
    name = getattr(obj, "name", None)
    dim = getattr(obj, "dim", None)
    return (
        isinstance(name, str)
        and bool(name.strip())
        and isinstance(dim, int)
        and not isinstance(dim, bool)
        and dim >= 1
    )
