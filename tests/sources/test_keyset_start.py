"""Where a keyset page of an in-memory snapshot starts (Qdrant and LanceDB pages)."""

from __future__ import annotations

import pytest

from memtui.sources import SourceError
from memtui.sources.lancedb.rows import key_of
from memtui.sources.shapes import keyset_start

IDS = ["lance:a", "lance:c", "lance:e"]


def test_no_cursor_starts_at_the_first_record():
    assert keyset_start(IDS, None, key_of, "LanceDB") == 0
    assert keyset_start(IDS, "", key_of, "LanceDB") == 0


def test_a_cursor_starts_after_itself_and_after_where_a_gone_record_was():
    assert keyset_start(IDS, "lance:a", key_of, "LanceDB") == 1
    assert keyset_start(IDS, "lance:b", key_of, "LanceDB") == 1  # forgotten since
    assert keyset_start(IDS, "lance:e", key_of, "LanceDB") == 3


def test_a_cursor_of_another_kind_is_refused_in_one_line():
    with pytest.raises(SourceError, match=r"cursor 'qd:7' is not a LanceDB record id"):
        keyset_start(IDS, "qd:7", key_of, "LanceDB")
