"""Memory sources: memtui's own database and other agents' stores behind one interface.

``open_source(path)`` recognizes a store by its tables and columns (a Qdrant
local folder by its layout; a Qdrant server with ``qdrant_url=``) and returns
a ``MemorySource``; see ``memtui.sources.base`` for the contract. The kinds it
knows are the registry's (``REGISTRY``, ``memtui.sources.registry``).
"""

from typing import Any

from memtui.sources.base import (
    CAPABILITIES,
    RECORD_STATES,
    DetailSection,
    FileIdentity,
    ForgetOutcome,
    MemorySource,
    Page,
    SourceError,
    SourceMovedError,
    SourceRecord,
    SourceSearchResult,
    SourceSummary,
    TierFacet,
)

# The adapters load on first use: the app on a memtui database (and anything that
# needs only the interface) does not pay for importing every store's adapter.
_LAZY = {
    "KINDS": "memtui.sources.detect",
    "REGISTRY": "memtui.sources.registry",
    "StoreKind": "memtui.sources.store_kind",
    "open_source": "memtui.sources.detect",
    "recognize": "memtui.sources.detect",
    "CollectionChoiceError": "memtui.sources.qdrant",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CAPABILITIES",
    "CollectionChoiceError",
    "KINDS",
    "RECORD_STATES",
    "REGISTRY",
    "DetailSection",
    "FileIdentity",
    "ForgetOutcome",
    "MemorySource",
    "Page",
    "SourceError",
    "SourceMovedError",
    "SourceRecord",
    "SourceSearchResult",
    "SourceSummary",
    "StoreKind",
    "TierFacet",
    "open_source",
    "recognize",
]
