"""LanceDB databases as memory sources (crewAI 1.x memory, any other table).

A LanceDB database is the folder ``lancedb.connect()`` was given; each table
is a ``NAME.lance/`` folder of ``data/*.lance`` fragments, ``_versions/``
manifests and ``_deletions/`` files. crewAI 1.x keeps its unified memory in
the table ``memories`` (``memtui.sources.lancedb.crewai`` maps its rows).

Reading opens the table with pylance at its latest version and reads every
row once per version; nothing in the folder is written (no lock, no index, no
manifest). memtui's keyword index and the vectors live in memtui's cache.

A delete in LanceDB only writes a deletion file: the row's text stays in its
data file and in every older version until the fragment is rewritten and the
old versions are cleaned up. A memtui forget does both (``erasure``).

The package: ``folder`` (the layout, read without lancedb), ``rows`` (a row as a
record), ``source`` (``LanceSource``), ``erasure`` (rewriting what holds a
deleted row), ``kind`` (the registry entry).
"""

from memtui.sources.lancedb.folder import INSTALL_HINT, TableInfo, find_lance_folder, table_infos
from memtui.sources.lancedb.source import LanceSource, TableChoiceError

__all__ = [
    "INSTALL_HINT",
    "LanceSource",
    "TableChoiceError",
    "TableInfo",
    "find_lance_folder",
    "table_infos",
]
