"""Small statistics shared by the store (tactic confidence) and the lanes."""

from __future__ import annotations

import math


def wilson_lower_bound(hits: int, n: int, z: float = 1.96) -> float | None:
    """Lower bound of the Wilson score interval for ``hits`` successes in ``n`` tries.

    Returns None when ``n`` is 0: no tries means no evidence, not a rate of zero.
    """
    if n <= 0:
        return None
    if hits < 0 or hits > n:
        raise ValueError(f"hits must be between 0 and n ({hits} of {n})")
    phat = hits / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = phat + z2 / (2 * n)
    margin = z * math.sqrt(phat * (1 - phat) / n + z2 / (4 * n * n))
    return max(0.0, (centre - margin) / denom)


def wilson_interval(hits: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Both ends of the Wilson score interval, for drawing it; None when ``n`` is 0."""
    if n <= 0:
        return None
    if hits < 0 or hits > n:
        raise ValueError(f"hits must be between 0 and n ({hits} of {n})")
    phat = hits / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = phat + z2 / (2 * n)
    margin = z * math.sqrt(phat * (1 - phat) / n + z2 / (4 * n * n))
    return max(0.0, (centre - margin) / denom), min(1.0, (centre + margin) / denom)
