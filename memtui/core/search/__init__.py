"""Hybrid search: sanitizer, keyword lane, vector lane, merge and trace (docs/design.md section 4).

The keyword lane ranks FTS5 matches by BM25; the vector lane ranks stored
embeddings by cosine similarity. Each lane is min-max normalized over its own
candidate pool, then the two are merged with fixed weights. Every number that
went into a score is kept in the trace, so the final score recomputes from it.

Everything here reads; the only writes go to the connection's ``temp`` schema
(scratch and vocabulary tables), which a read-only open allows. The engine
runs on any ``memtui.core.index.SearchIndex``.

The parts: ``request`` (what a search asks for), ``trace`` (what it found and
why), ``text`` (the query as the index sees it), ``scores`` (the arithmetic),
``hidden`` (the rows the live rule hides), ``keyword`` and ``vector`` (the
lanes), ``embedding`` (the query's vector), ``engine`` (the merge and
``rerank``) and ``explain`` (one record's BM25, term by term).
"""

from memtui.core.search.engine import KEYWORD_ONLY_REASON, hybrid_search, rerank
from memtui.core.search.explain import (
    BM25_B,
    BM25_K1,
    BM25_MIN_IDF,
    explain_keyword,
    index_averages,
)
from memtui.core.search.request import Progress, SearchRequest
from memtui.core.search.scores import (
    DEFAULT_LIMIT,
    DEFAULT_POOL_SIZE,
    DEFAULT_WEIGHTS,
    EXCLUSION_REASONS,
    FALLBACK_WEIGHTS,
    check_weights,
    cosine,
    merge_score,
    min_max_normalize,
)
from memtui.core.search.text import (
    empty_query_note,
    index_tokens,
    match_expression,
    sanitize_query,
)
from memtui.core.search.trace import (
    LANES,
    LanePool,
    LaneScore,
    MemoryModeNote,
    ResultTrace,
    SearchResponse,
    SearchResult,
    SearchTrace,
    SourceNote,
)

__all__ = [
    "BM25_B",
    "BM25_K1",
    "BM25_MIN_IDF",
    "DEFAULT_LIMIT",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_WEIGHTS",
    "EXCLUSION_REASONS",
    "FALLBACK_WEIGHTS",
    "KEYWORD_ONLY_REASON",
    "LANES",
    "LanePool",
    "LaneScore",
    "MemoryModeNote",
    "Progress",
    "ResultTrace",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "SearchTrace",
    "SourceNote",
    "check_weights",
    "cosine",
    "empty_query_note",
    "explain_keyword",
    "hybrid_search",
    "index_averages",
    "index_tokens",
    "match_expression",
    "merge_score",
    "min_max_normalize",
    "rerank",
    "sanitize_query",
]
