"""A search result's breakdown as the digits printed: one source for the app and the CLI.

Both print exactly these strings, so the two cannot disagree. Every line redoes
from the digits shown, by hand, in exact decimals:

- ``(raw − min) / (max − min)`` rounds to the normalized score as printed (raw, min
  and max get as many places as that needs, six at least, the same for a lane in
  every breakdown of one search);
- ``normalized × weight = part`` exactly: the normalized score has six places (more
  only where needed, below), the part as many as the product has;
- ``part + part = sum`` exactly; the sum rounds to the score to six places and, half
  up, to the four places of a results list (the normalized scores get more places
  when they would otherwise miss either);
- BM25: each term's contribution is its value rounded to six places (so equal inputs
  print equal contributions) and recomputes from the idf and average length printed
  beside it; the contributions and the rounding remainder, on its own line when it is
  not zero, add up exactly to the sum.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext
from functools import partial
from typing import Any

from memtui.core.search.trace import LANES, LanePool, SearchResult

SHOWN_PLACES = 6
"""Decimal places of every number in a breakdown (more only where needed)."""
LISTED_PLACES = 4
"""Decimal places of a score in a results list (rounded half up)."""
_MOST_PLACES = 24


def fmt(value: float | None, places: int = SHOWN_PLACES) -> str:
    """``value`` with ``places`` decimals (nearest); a dash for a missing value."""
    return "—" if value is None else f"{value:.{places}f}"


def weight_text(weight: float) -> str:
    """A weight as its shortest exact decimal (0.3, 0.7, 1.0): a reader multiplies by this."""
    text = repr(float(weight))
    return f"{Decimal(text):f}" if "e" in text or "E" in text else text


def shown(value: float, places: int) -> Decimal:
    """Exactly the number ``fmt(value, places)`` prints."""
    return Decimal(f"{value:.{places}f}")


def half_up(exact: Decimal, places: int) -> Decimal:
    return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def listed_score(score: float) -> str:
    """A score as a results list shows it: four places, the float taken exactly, half up."""
    return f"{half_up(Decimal(float(score)), LISTED_PLACES):.{LISTED_PLACES}f}"


def rounds_to(exact: Decimal, printed: Decimal, places: int) -> bool:
    """A reader rounding ``exact`` to ``places`` gets ``printed``, rounding halves up or to
    even."""
    step = Decimal(1).scaleb(-places)
    return all(
        exact.quantize(step, rounding=r) == printed for r in (ROUND_HALF_UP, ROUND_HALF_EVEN)
    )


def _divide(top: Decimal, bottom: Decimal) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 50
        return top / bottom


def _places_for(check: Callable[[int], bool], start: int) -> int:
    """The fewest decimals from ``start`` up for which ``check(places)`` holds."""
    places = start
    while places < _MOST_PLACES and not check(places):
        places += 1
    return places


# ---------------------------------------------------------------- the score


@dataclass(frozen=True)
class LaneStep:
    """One lane of one result as printed: every number is text a reader can recompute."""

    lane: str
    raw: str | None  # None: the lane did not find the record
    low: str | None  # the pool's min and max; None when the lane did not find the record
    high: str | None  # or its pool is all-equal
    normalized: str
    weight: str
    part: str
    places: int  # decimals of raw, min and max

    @property
    def all_equal(self) -> bool:
        return self.raw is not None and self.low is None


@dataclass(frozen=True)
class Arithmetic:
    """A result's score as printed: lane steps, then ``part + part = total ≈ score``."""

    steps: tuple[LaneStep, ...]
    total: str
    """The exact sum of the printed parts."""
    score: str
    """The score to six places; ``total`` rounds to it."""
    listed: str
    """The score to four places, half up, as a results list shows it; ``total`` rounds to it."""

    @property
    def adds_up(self) -> bool:
        """Redone from the printed digits alone."""
        products = all(
            Decimal(s.normalized) * Decimal(s.weight) == Decimal(s.part) for s in self.steps
        )
        total = sum((Decimal(s.part) for s in self.steps), Decimal(0))
        return (
            products
            and total == Decimal(self.total)
            and rounds_to(total, Decimal(self.score), SHOWN_PLACES)
            and f"{half_up(total, LISTED_PLACES):f}" == self.listed
        )


def _sum_of_parts(norms: dict[str, float], weights: dict[str, Decimal], places: int) -> Decimal:
    return sum((shown(norms[lane], places) * weights[lane] for lane in LANES), Decimal(0))


def _normalizes(
    raw: float, low: float, high: float, norm: Decimal, norm_places: int, places: int
) -> bool:
    """``(raw − min) / (max − min)`` from the numbers printed with ``places`` decimals rounds
    to the normalized score as printed."""
    r, lo, hi = (shown(v, places) for v in (raw, low, high))
    return hi != lo and rounds_to(_divide(r - lo, hi - lo), norm, norm_places)


def arithmetic(
    result: SearchResult, pools: Mapping[str, LanePool], raw_places: dict[str, int] | None = None
) -> Arithmetic:
    """The digits of ``result``'s breakdown (``pools``: its response's ``trace.pools``).

    ``raw_places`` (``lane_places``) gives each lane's raw, min and max at least that
    many decimals, so that they read alike in every breakdown of one search.
    """
    trace = result.trace
    weights = {lane: Decimal(weight_text(trace.weights[lane])) for lane in LANES}
    norms = {"keyword": float(result.keyword_score), "vector": float(result.vector_score)}
    score = shown(result.score, SHOWN_PLACES)
    listed = listed_score(result.score)

    def adds_up(places: int) -> bool:
        total = _sum_of_parts(norms, weights, places)
        return (
            rounds_to(total, score, SHOWN_PLACES) and f"{half_up(total, LISTED_PLACES):f}" == listed
        )

    norm_places = _places_for(adds_up, SHOWN_PLACES)
    steps = []
    for lane in LANES:
        raw = trace.lane(lane).raw
        norm = shown(norms[lane], norm_places)
        texts = (f"{norm:f}", weight_text(trace.weights[lane]), f"{norm * weights[lane]:f}")
        pool = pools.get(lane)
        low, high = (pool.min, pool.max) if pool is not None else (None, None)
        start = max(SHOWN_PLACES, (raw_places or {}).get(lane, SHOWN_PLACES))
        if raw is None:  # scores 0 in this lane, exactly
            steps.append(LaneStep(lane, None, None, None, "0", texts[1], "0", start))
        elif low is None or high is None or low == high:  # an all-equal pool maps to 1.0
            steps.append(LaneStep(lane, fmt(raw, start), None, None, *texts, start))
        else:
            places = _places_for(partial(_normalizes, raw, low, high, norm, norm_places), start)
            shown_raw, shown_low, shown_high = (fmt(v, places) for v in (raw, low, high))
            steps.append(LaneStep(lane, shown_raw, shown_low, shown_high, *texts, places))
    total = sum((Decimal(step.part) for step in steps), Decimal(0))
    return Arithmetic(tuple(steps), f"{total:f}", f"{score:f}", listed)


def lane_places(results: Iterable[SearchResult], pools: Mapping[str, LanePool]) -> dict[str, int]:
    """Decimals for each lane's raw scores, min and max: the most any of ``results`` needs
    (give a response's ``candidates``, every merged record, so that the digits do not depend
    on how many results are shown)."""
    places = {lane: SHOWN_PLACES for lane in LANES}
    for result in results:
        for step in arithmetic(result, pools).steps:
            places[step.lane] = max(places[step.lane], step.places)
    return places


# ---------------------------------------------------------------- BM25, term by term


def _bm25_term(idf: Decimal, tf: int, doc_len: int, avg_len: Decimal, k1: str, b: str) -> Decimal:
    """FTS5's per-term BM25 from printed numbers, exactly."""
    k, bb = Decimal(k1), Decimal(b)
    with localcontext() as ctx:
        ctx.prec = 50
        if not tf:
            return Decimal(0)
        return idf * tf * (k + 1) / (tf + k * (1 - bb + bb * doc_len / avg_len))


def bm25_places(total: float) -> int:
    """Six places; more for a tiny sum (every term near FTS5's idf floor), so that it keeps
    four significant digits."""
    places = SHOWN_PLACES
    while total and places < _MOST_PLACES and abs(total) < 10.0 ** (3 - places):
        places += 1
    return places


@dataclass(frozen=True)
class Bm25Digits:
    """The per-term BM25 block as printed."""

    idf: tuple[str, ...]
    avg_len: str
    contributions: tuple[str, ...]
    remainder: str | None
    """What the rounded contributions miss of the sum (``+0.000001``); None when nothing."""
    total: str
    places: int
    """Decimals of the contributions and the sum."""

    def number(self, value: float | None) -> str:
        """Another number of the block (FTS5's ``bm25()``, the lane's raw) at its places."""
        return fmt(value, self.places)


def bm25_digits(detail: dict[str, Any]) -> Bm25Digits:
    """The digits of ``explain``'s per-term decomposition ``detail``."""
    terms = detail["terms"]
    places = bm25_places(float(detail["total"]))
    contributions = [shown(float(t["contribution"]), places) for t in terms]
    total = shown(float(detail["total"]), places)
    remainder = total - sum(contributions, Decimal(0))

    def recomputes(term: dict[str, Any], printed: Decimal, decimals: int) -> bool:
        exact = _bm25_term(
            shown(term["idf"], decimals),
            int(term["tf"]),
            int(term["doc_len"]),
            shown(term["avg_len"], decimals),
            weight_text(term.get("k1", 1.2)),
            weight_text(term.get("b", 0.75)),
        )
        return rounds_to(exact, printed, places)

    decimals = max(
        [places]
        + [
            _places_for(partial(recomputes, term, printed), places)
            for term, printed in zip(terms, contributions, strict=True)
        ]
    )
    avg = terms[0]["avg_len"] if terms else detail.get("avg_len", 0.0)
    return Bm25Digits(
        idf=tuple(fmt(t["idf"], decimals) for t in terms),
        avg_len=fmt(avg, decimals),
        contributions=tuple(f"{c:f}" for c in contributions),
        remainder=f"{remainder:+f}" if remainder else None,
        total=f"{total:f}",
        places=places,
    )
