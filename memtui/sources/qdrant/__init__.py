"""Qdrant collections as memory sources: local folders (read without the client) and servers.

A Qdrant **local folder** (what ``QdrantClient(path=...)`` writes) holds
``meta.json`` (collection configs, aliases) and one ``collection/<name>/
storage.sqlite`` per collection: ``points(id TEXT PRIMARY KEY, point BLOB)``,
``id`` base64(pickle(point id)), ``point`` a pickled ``PointStruct``.

Reading a folder (no client, no lock, nothing run):

- ``storage.sqlite`` is opened read-only (SQLite URI ``mode=ro``; when a writer
  keeps it locked past the busy timeout, ``immutable=1``), and every point is
  decoded with ``memtui.sources.safe_pickle``: only the point model's classes
  are admitted (mapped to inert stand-ins), so a crafted point is refused with
  an error naming what it tried to load, and nothing in it runs. qdrant-client
  is not needed for this. A point that would cost more than a point can (a
  list inside itself, nested too deep, a "billion laughs") is refused alone,
  named in one line (``refused``), and the rest of the collection is read.
- The folder's ``.lock`` is never taken for reading. Whether a running agent
  holds it is read from ``/proc/locks`` (Linux): then the folder opens
  read-only, with the note "the agent is live", and memtui refuses to write.
- Nothing is written: not ``meta.json``, not ``.lock``, not the SQLite files
  (no journal, no WAL), not beside the folder. The keyword index lives in
  memtui's cache folder and the audit log is created only by a write.

Writing a folder (``--allow-writes``, agent not running): memtui takes the
folder's ``.lock`` exactly as qdrant-client does (exclusive, non-blocking: it
fails while an agent holds it, and an agent cannot start while memtui writes),
deletes the point's row(s) from ``storage.sqlite`` directly with
``secure_delete`` on, runs ``VACUUM`` so no free page keeps the point, and
checks the file's bytes. It does not delete through qdrant-client: the client
would unpickle every stored point with the unrestricted ``pickle.loads`` (the
very hole the reader avoids) and hold all of them in memory (10k x 1024 dims:
3.8 s, 850 MB), and its delete leaves the point's bytes in free pages anyway.
The client itself reads ``storage.sqlite`` afresh on its next open, so the
point is simply gone for it.

A Qdrant **server** (``--qdrant-url URL [--api-key K]``) is opened through
qdrant-client (``pip install 'memtui[qdrant]'``); a forget deletes through the
client (``wait=True``) and checks that the point is gone; the server's own
storage is the server's to compact.

Which collection: ``--collection NAME`` (an alias works too); else
Cyber-AutoAgent's ``cyber_autoagent_memories`` or mem0's ``mem0`` when
present; else the only collection; else a ``CollectionChoiceError`` listing
every collection with its point count and dimension (the app shows a picker).

The package: ``collections`` (which collections, which one), ``points`` (a
decoded point), ``folder`` and ``lock`` (a local folder), ``server`` (a
server), ``backend`` (what the source asks of either), ``source``
(``QdrantSource``), ``opening`` (``open_qdrant_folder``, ``open_qdrant_server``).
"""

from memtui.sources.qdrant.backend import Backend
from memtui.sources.qdrant.collections import (
    CAA_COLLECTION,
    INSTALL_HINT,
    KIND_LABELS,
    MEM0_COLLECTION,
    WEB_CACHE_PATTERN,
    CollectionChoiceError,
    CollectionInfo,
    choose_collection,
    classify,
    client_missing_error,
)
from memtui.sources.qdrant.folder import (
    BUSY_TIMEOUT_MS,
    META_FILE,
    STORAGE_FILE,
    FolderBackend,
    find_qdrant_folder,
    folder_collections,
    is_qdrant_folder,
    purge_sqlite,
    sqlite_uri,
    stat_key,
)
from memtui.sources.qdrant.lock import LOCK_FILE, folder_write_lock, lock_holders
from memtui.sources.qdrant.opening import (
    Mem0EntitiesSource,
    SourceClass,
    open_qdrant_folder,
    open_qdrant_server,
    plain_source_class,
)
from memtui.sources.qdrant.points import (
    ID_PREFIX,
    PointData,
    decode_point,
    epoch_text,
    json_safe,
    normalize_pid,
    payload_text,
    pid_of,
    record_id_of,
    text_fields,
    text_of,
)
from memtui.sources.qdrant.server import ServerBackend, make_client, safe_url
from memtui.sources.qdrant.source import QdrantSource

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CAA_COLLECTION",
    "ID_PREFIX",
    "INSTALL_HINT",
    "KIND_LABELS",
    "LOCK_FILE",
    "MEM0_COLLECTION",
    "META_FILE",
    "STORAGE_FILE",
    "WEB_CACHE_PATTERN",
    "Backend",
    "CollectionChoiceError",
    "CollectionInfo",
    "FolderBackend",
    "Mem0EntitiesSource",
    "PointData",
    "QdrantSource",
    "ServerBackend",
    "SourceClass",
    "choose_collection",
    "classify",
    "client_missing_error",
    "decode_point",
    "epoch_text",
    "find_qdrant_folder",
    "folder_collections",
    "folder_write_lock",
    "is_qdrant_folder",
    "json_safe",
    "lock_holders",
    "make_client",
    "normalize_pid",
    "open_qdrant_folder",
    "open_qdrant_server",
    "payload_text",
    "pid_of",
    "plain_source_class",
    "purge_sqlite",
    "record_id_of",
    "safe_url",
    "sqlite_uri",
    "stat_key",
    "text_fields",
    "text_of",
]
