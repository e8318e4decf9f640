"""The Wilson score bound and interval (design.md section 5)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtui.core import lanes
from memtui.core.stats import wilson_interval, wilson_lower_bound


def test_worked_examples_from_the_design():
    assert round(wilson_lower_bound(1, 1), 6) == 0.206543
    assert round(wilson_lower_bound(12, 23), 6) == 0.329624


def test_bound_ranks_evidence_above_a_lucky_single_try():
    # The raw ratio says 1/1 beats 12/23; the bound says the opposite.
    assert 1 / 1 > 12 / 23
    assert wilson_lower_bound(12, 23) > wilson_lower_bound(1, 1)


def test_no_tries_is_no_data_not_zero():
    assert wilson_lower_bound(0, 0) is None
    assert wilson_interval(0, 0) is None


def test_zero_hits_is_a_bound_of_zero():
    assert wilson_lower_bound(0, 8) == 0.0
    assert wilson_lower_bound(0, 1) == 0.0


def test_all_hits_bound_is_below_one():
    assert 0.0 < wilson_lower_bound(3, 3) < 1.0
    assert round(wilson_lower_bound(3, 3), 4) == 0.4385


def test_more_hits_than_tries_is_refused():
    with pytest.raises(ValueError, match="between 0 and n"):
        wilson_lower_bound(5, 4)


def test_custom_z_changes_the_bound():
    # A wider interval (larger z) gives a lower bound.
    assert wilson_lower_bound(12, 23, z=2.576) < wilson_lower_bound(12, 23)


def test_lanes_reexports_the_same_functions():
    assert lanes.wilson_lower_bound is wilson_lower_bound
    assert lanes.wilson_interval is wilson_interval


@given(
    st.integers(min_value=1, max_value=5000).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n))
    )
)
def test_bound_never_exceeds_the_raw_rate(pair):
    n, hits = pair
    bound = wilson_lower_bound(hits, n)
    assert 0.0 <= bound <= hits / n + 1e-12
    lo, hi = wilson_interval(hits, n)
    assert lo == pytest.approx(bound)
    assert 0.0 <= lo <= hits / n + 1e-12 <= hi + 2e-12
    assert hi <= 1.0


@given(st.integers(min_value=1, max_value=500))
def test_more_evidence_at_the_same_rate_raises_the_bound(k):
    # Same raw rate (1/2), ten times the tries: the bound can only grow.
    assert wilson_lower_bound(10 * k, 20 * k) > wilson_lower_bound(k, 2 * k)
