"""Record ids made by the database: ``encode_id``'s ``prefix:part/part`` in SQL.

A build sends its rows' ids as text the database made, not parts that Python then
percent-encodes row by row: each part as it is when every character is one that
``encode_id`` leaves (the usual key), else each other character's UTF-8 bytes as
``%XX``, uppercase, as ``urllib.parse.quote`` writes them.
"""

from __future__ import annotations

_SAFE = "[A-Za-z0-9_.~-]"
"""What ``encode_id`` leaves as it is (``urllib.parse.quote``'s always-safe characters)."""


def literal(text: str) -> str:
    """``text`` as an SQL string literal (standard-conforming: quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def encoded_part_sql(column: str) -> str:
    """SQL giving ``column`` percent-encoded as ``encode_id`` does (the ``%`` written
    ``chr(37)``: the statement's text holds no ``%`` for the driver to read)."""
    each = (
        f"CASE WHEN c.ch ~ '^{_SAFE}$' THEN c.ch ELSE upper(regexp_replace("
        "encode(convert_to(c.ch, 'UTF8'), 'hex'), '(..)', chr(37) || '\\1', 'g')) END"
    )
    encoded = (
        f"(SELECT coalesce(string_agg({each}, '' ORDER BY c.n), '') "
        f"FROM regexp_split_to_table({column}, '') WITH ORDINALITY AS c(ch, n))"
    )
    return f"(CASE WHEN {column} ~ '^{_SAFE}*$' THEN {column} ELSE {encoded} END)"


def id_sql(kind_prefix: str, *columns: str) -> str:
    """SQL giving ``encode_id(kind_prefix, *columns)`` in the database."""
    parts = " || '/' || ".join(encoded_part_sql(column) for column in columns)
    return f"({literal(kind_prefix + ':')} || {parts})"
