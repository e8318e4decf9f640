"""Filters over a Qdrant collection's records: in memory, and in the cached index's SQL.

A scope key whose value is a list (Cyber-AutoAgent's targets) matches when any
element is one of the wanted values.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from memtui.sources.cache import FilterSql


class Scoped(Protocol):
    """What a filter looks at: a record (or a row not yet decoded into one)."""

    @property
    def tier(self) -> str: ...

    @property
    def record_type(self) -> str: ...

    @property
    def scope(self) -> Mapping[str, Any]: ...


def matches(record: Scoped, filters: Mapping[str, Any]) -> bool:
    """Whether ``record`` has every filter's value (None: has none)."""
    for key, value in filters.items():
        if key == "tier":
            have: Any = record.tier
        elif key == "record_type":
            have = record.record_type
        else:
            have = record.scope.get(key)
        if isinstance(have, list):
            wanted = value if isinstance(value, list | tuple | set) else [value]
            if value is None:
                if have:
                    return False
            elif not set(map(str, have)) & set(map(str, wanted)):
                return False
        elif value is None:
            if have is not None:
                return False
        elif isinstance(value, list | tuple | set):
            if str(have) not in {str(v) for v in value} or have is None:
                return False
        elif have is None or str(have) != str(value):
            return False
    return True


def list_filter_sql(list_keys: Collection[str]) -> FilterSql:
    """The cached index's SQL for a filter on a list-valued key, or on several values."""

    def custom(key: str, value: Any, column: str) -> tuple[str, list[Any]] | None:
        values = list(value) if isinstance(value, list | tuple | set) else None
        if key in list_keys:
            wanted = [str(v) for v in (values if values is not None else [value])]
            marks = ",".join("?" * len(wanted)) or "NULL"
            return (
                f"EXISTS (SELECT 1 FROM json_each(coalesce({column}, '[]')) "
                f"WHERE json_each.value IN ({marks}))",
                wanted,
            )
        if values is not None:
            marks = ",".join("?" * len(values)) or "NULL"
            return f"{column} IN ({marks})", [str(v) for v in values]
        return None

    return custom  # type: ignore[return-value]
