from datetime import UTC, datetime, timedelta, timezone

import pytest

from memtui.core.records import (
    TIERS,
    MemoryRecord,
    anonymize_target,
    format_timestamp,
    normalize_endpoint,
    parse_timestamp,
    tactic_signature,
)


def test_tiers_are_the_four_of_the_design():
    assert TIERS == ("working", "episodic", "longterm", "knowledge")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/9/orders", "/api/*/orders"),
        ("/api/v2/items/17", "/api/v2/items/*"),
        ("/u/3f2a9c1e-0b4d-4c1a-9e2f-1a2b3c4d5e6f/x", "/u/*/x"),
        ("/blob/0123456789abcdef0123", "/blob/*"),
        ("/api/v2/items", "/api/v2/items"),
        ("/search?q=1#top", "/search"),
        ("/cafe/beef", "/cafe/beef"),
    ],
)
def test_normalize_endpoint_masks_volatile_segments(path, expected):
    assert normalize_endpoint(path) == expected


def test_signature_dedups_on_normalized_endpoint_and_hides_parts():
    a = tactic_signature("p:q", "sqlmap", "/api/9/orders", "id")
    b = tactic_signature("p:q", "SQLMap", "/api/12/orders", "id")
    assert a == b
    assert a != tactic_signature("p:q", "sqlmap", "/api/9/orders", "name")
    assert a != tactic_signature("p:r", "sqlmap", "/api/9/orders", "id")
    assert "orders" not in a and len(a) == 16


def test_anonymize_target_is_stable_case_insensitive_and_short():
    assert anonymize_target("Shop.ACME.example") == anonymize_target("shop.acme.example")
    assert anonymize_target("shop.acme.example.") == anonymize_target("shop.acme.example")
    assert len(anonymize_target("shop.acme.example")) == 8
    assert anonymize_target("shop.acme.example") != anonymize_target("api.acme.example")
    assert "acme" not in anonymize_target("shop.acme.example")


def test_timestamps_are_fixed_width_and_compare_as_text():
    early = format_timestamp(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    late = format_timestamp(datetime(2026, 1, 2, 3, 4, 5, 500, tzinfo=UTC))
    assert early == "2026-01-02T03:04:05.000000Z"
    assert early < late and len(early) == len(late)
    shifted = datetime(2026, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    assert format_timestamp(shifted) == early
    assert parse_timestamp("2026-01-02T03:04:05Z") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with pytest.raises(ValueError, match="no timezone"):
        parse_timestamp("2026-01-02T03:04:05")
    with pytest.raises(ValueError, match="not an ISO-8601"):
        parse_timestamp("yesterday")


def test_expiry_boundary_is_strict():
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    at_now = MemoryRecord(1, "working", "note", "x", expires_at=format_timestamp(now))
    later = MemoryRecord(
        2, "working", "note", "x", expires_at=format_timestamp(now + timedelta(microseconds=1))
    )
    assert at_now.is_expired(now)
    assert not later.is_expired(now)
    assert not MemoryRecord(3, "working", "note", "x").is_expired(now)
