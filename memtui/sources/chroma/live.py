"""Whether another process has a Chroma folder open: a running chromadb client.

chromadb has no lock file: a ``PersistentClient`` keeps ``chroma.sqlite3`` and its
HNSW segment files open for as long as it lives (and its index in memory, which it
writes back). So a live agent is found by its open files: every ``/proc/PID/fd``
entry that names a file under the folder. Processes whose ``fd`` folder cannot be
read (another user's, without the rights) cannot be seen; on a system without
``/proc`` nothing can be told (None).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def folder_openers(folder: Path, *, proc: Path = PROC) -> list[int] | None:
    """Pids of the other processes with a file under ``folder`` open; None when it cannot
    be told here."""
    if not (proc / "self" / "fd").is_dir():
        return None
    root = str(folder.resolve())
    inside = root.rstrip("/") + "/"
    me = os.getpid()
    found: list[int] = []
    try:
        entries = list(os.scandir(proc))
    except OSError:
        return None
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            fds = list(os.scandir(os.path.join(entry.path, "fd")))
        except OSError:  # gone, or not ours to read
            continue
        for fd in fds:
            try:
                target = os.readlink(fd.path)
            except OSError:
                continue
            if target.startswith(inside) or target == root:
                found.append(int(entry.name))
                break
    return sorted(found)
