"""A restricted unpickler for the points of a Qdrant local folder.

``qdrant-client`` keeps each point of a local collection as ``pickle.dumps`` of
a ``PointStruct`` (and the point's id, pickled, as the row key). Unpickling
runs whatever a pickle names: a crafted point in an untrusted folder runs code
the moment a client opens the folder. memtui never calls ``pickle.loads`` on
these bytes; it uses ``PointUnpickler``, whose ``find_class`` admits only the
classes a real point references and maps them to light local stand-ins:

- ``qdrant_client.http.models.models.PointStruct`` (the point),
- ``qdrant_client.http.models.models.SparseVector`` (a named sparse vector,
  e.g. mem0 2.x's ``bm25`` slot).

That is all ``pickletools.dis`` shows in points written by qdrant-client 1.x
with pydantic 2 (protocol 4; payloads are converted to JSON-safe values before
they are stored, dense vectors are plain lists of floats). Everything else in
such a pickle is built by opcodes (dicts, lists, strings, numbers, sets) that
call no class. Pickles of protocol 3 and older (Python < 3.8) build the
model's fields-set with ``builtins.set``: ``set`` and ``frozenset`` are
admitted too (they only copy an iterable). A pickle that names any other global (``os.system``,
``builtins.exec``, ``copyreg._reconstructor``, numpy, ...) is refused with an
``UnsafePickleError`` naming it, before anything is called. The stand-ins do
nothing but keep the fields, so no qdrant-client (or pydantic) code runs either,
and qdrant-client need not be installed.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

#: the modules a pickled point names its classes by (``__module__`` of the models)
POINT_MODULES = frozenset({"qdrant_client.http.models.models", "qdrant_client.http.models"})


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle names a class or function the point reader does not admit."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        super().__init__(f"{module}.{name}")


class _Model:
    """A stand-in for a pydantic model of qdrant-client: keeps its fields, runs nothing."""

    __slots__ = ("fields",)
    model = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.fields: dict[str, Any] = dict(kwargs)

    def __setstate__(self, state: Any) -> None:
        # pydantic 2 pickles {'__dict__': fields, '__pydantic_extra__': ...,
        # '__pydantic_fields_set__': ..., '__pydantic_private__': ...};
        # pydantic 1 pickled {'__dict__': fields, '__fields_set__': ...}.
        if isinstance(state, tuple) and len(state) == 2:
            state = state[0] if isinstance(state[0], dict) else state[1]
        fields = state.get("__dict__", state) if isinstance(state, dict) else {}
        self.fields = dict(fields) if isinstance(fields, dict) else {}

    def __repr__(self) -> str:
        return f"<stored {self.model} {sorted(self.fields)}>"


class StoredPointStruct(_Model):
    __slots__ = ()
    model = "PointStruct"


class StoredSparseVector(_Model):
    __slots__ = ()
    model = "SparseVector"


ADMITTED: dict[str, type[_Model]] = {
    "PointStruct": StoredPointStruct,
    "SparseVector": StoredSparseVector,
}


def admitted_names() -> str:
    return ", ".join(f"qdrant_client.http.models.{name}" for name in ADMITTED)


SAFE_BUILTINS: dict[tuple[str, str], Any] = {
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("__builtin__", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
}


class PointUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only the point model's classes, to stand-ins."""

    def find_class(self, module: str, name: str) -> Any:
        if module in POINT_MODULES and name in ADMITTED:
            return ADMITTED[name]
        if (module, name) in SAFE_BUILTINS:
            return SAFE_BUILTINS[(module, name)]
        raise UnsafePickleError(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("<persistent id>", repr(pid)[:40])


def load_point(data: bytes) -> Any:
    """A stored point as stand-ins; ``UnsafePickleError`` when it names anything else."""
    return PointUnpickler(io.BytesIO(bytes(data))).load()


class _NoClassUnpickler(pickle.Unpickler):
    """For the row keys (a pickled int or str): no class at all is admitted."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("<persistent id>", repr(pid)[:40])


def load_plain(data: bytes) -> Any:
    """A pickle that may hold only plain values (ints, strings, containers)."""
    return _NoClassUnpickler(io.BytesIO(bytes(data))).load()
