"""Memory sources: memtui's own database and other agents' stores behind one interface.

``open_source(path)`` recognizes a store by its tables and columns (a Qdrant
local folder by its layout; a Qdrant server with ``qdrant_url=``) and returns
a ``MemorySource``; see ``memtui.sources.base`` for the contract.
"""

from memtui.sources.base import (
    CAPABILITIES,
    RECORD_STATES,
    DetailSection,
    ForgetOutcome,
    MemorySource,
    Page,
    SourceError,
    SourceRecord,
    SourceSearchResult,
    SourceSummary,
    TierFacet,
)
from memtui.sources.detect import KINDS, open_source, recognize
from memtui.sources.qdrant import CollectionChoiceError

__all__ = [
    "CAPABILITIES",
    "CollectionChoiceError",
    "KINDS",
    "RECORD_STATES",
    "DetailSection",
    "ForgetOutcome",
    "MemorySource",
    "Page",
    "SourceError",
    "SourceRecord",
    "SourceSearchResult",
    "SourceSummary",
    "TierFacet",
    "open_source",
    "recognize",
]
