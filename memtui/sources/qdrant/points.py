"""One Qdrant point as memtui reads it: its id, payload, dense vector, and its text."""

from __future__ import annotations

import base64
import math
import sys
import uuid
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memtui.core.records import format_timestamp
from memtui.core.secrets import is_secret_key
from memtui.sources.base import decode_id, encode_id
from memtui.sources.safe_pickle import StoredPointStruct, StoredSparseVector

ID_PREFIX = "qd"


@dataclass
class PointData:
    """One decoded point: id, payload, and its dense vector as little-endian float32."""

    pid: int | str
    payload: dict[str, Any]
    vector: bytes | None
    dims: int | None
    dense_names: tuple[str, ...] = ()
    sparse_names: tuple[str, ...] = ()
    rowids: tuple[int, ...] = ()


def normalize_pid(value: Any) -> int | str:
    """A point id as Qdrant normalizes it: an unsigned int, or a canonical UUID string."""
    if isinstance(value, bool):
        raise ValueError("a point id is an unsigned integer or a UUID")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            return value
    if isinstance(value, uuid.UUID):
        return str(value)
    raise ValueError(f"a point id is an unsigned integer or a UUID, not {type(value).__name__}")


def record_id_of(pid: int | str) -> str:
    return encode_id(ID_PREFIX, str(pid))


def pid_of(record_id: str) -> int | str | None:
    parts = decode_id(ID_PREFIX, str(record_id), 1)
    if parts is None or not parts[0]:
        return None
    text = parts[0]
    if text.isdigit():
        return int(text)
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return text


def _pack(values: Any) -> tuple[bytes, int] | None:
    if not isinstance(values, list | tuple) or not values:
        return None
    try:
        packed = array("f", values)  # refuses anything but numbers (in C, fast)
    except (TypeError, OverflowError):
        return None
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes(), len(values)


def json_safe(value: Any) -> Any:
    """A payload value as JSON (sets and tuples become lists, other objects their repr)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    return repr(value)


def decode_point(obj: Any, vector_name: str | None) -> PointData:
    """A point from the restricted unpickler's stand-in (or a client ``Record``)."""
    if isinstance(obj, StoredPointStruct):
        fields = obj.fields
        raw_id, raw_vector, raw_payload = (
            fields.get("id"),
            fields.get("vector"),
            fields.get("payload"),
        )
    else:  # a qdrant-client Record / PointStruct from a server
        raw_id = getattr(obj, "id", None)
        raw_vector = getattr(obj, "vector", None)
        raw_payload = getattr(obj, "payload", None)
    pid = normalize_pid(raw_id)
    payload = json_safe(raw_payload) if isinstance(raw_payload, dict) else {}
    dense: dict[str, Any] = {}
    sparse: list[str] = []
    if isinstance(raw_vector, dict):
        for name, value in raw_vector.items():
            if isinstance(value, StoredSparseVector) or hasattr(value, "indices"):
                sparse.append(str(name))
            else:
                dense[str(name)] = value
    elif raw_vector is not None:
        dense[""] = raw_vector
    chosen = vector_name if vector_name in dense else ("" if "" in dense else None)
    if chosen is None and len(dense) == 1:
        chosen = next(iter(dense))
    packed = _pack(dense.get(chosen)) if chosen is not None else None
    return PointData(
        pid=pid,
        payload=payload,
        vector=packed[0] if packed else None,
        dims=packed[1] if packed else None,
        dense_names=tuple(sorted(dense)),
        sparse_names=tuple(sorted(sparse)),
    )


def text_of(value: Any) -> str:
    """A payload's text field, or "" when it is not a string."""
    return value if isinstance(value, str) else ""


def text_fields(value: Any) -> list[str]:
    """Every string in a JSON value, depth first, leaving out secret-named fields."""
    out: list[str] = []
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not is_secret_key(str(key)):
                out.extend(text_fields(item))
    elif isinstance(value, list):
        for item in value:
            out.extend(text_fields(item))
    return out


def payload_text(value: Any) -> str | None:
    """A scalar payload value as a scope value is typed (``true``, ``7``, ``alice``);
    None for a list, an object or nothing."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def epoch_text(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    try:
        return format_timestamp(datetime.fromtimestamp(float(value), UTC))
    except (OverflowError, OSError, ValueError):
        return None
