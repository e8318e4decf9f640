"""Whether an agent holds a Qdrant folder (``/proc/locks``), and taking its ``.lock`` to write."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from memtui.sources.base import SourceError

LOCK_FILE = ".lock"


def lock_holders(lock_path: Path) -> list[int] | None:
    """Pids holding a lock on ``lock_path`` per ``/proc/locks``; None when it cannot be told."""
    try:
        stat = lock_path.stat()
    except FileNotFoundError:
        return []
    except OSError:
        return None
    try:
        text = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    wanted = (os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino)
    holders: list[int] = []
    for line in text.splitlines():
        parts = line.split()
        if "->" in parts:  # a waiting request, not a held lock
            continue
        for index, part in enumerate(parts):
            if part.count(":") == 2 and index > 0:
                major, minor, inode = part.split(":")
                try:
                    found = (int(major, 16), int(minor, 16), int(inode))
                except ValueError:
                    break
                if found == wanted:
                    try:
                        holders.append(int(parts[index - 1]))
                    except ValueError:
                        holders.append(-1)
                break
    return holders


@contextlib.contextmanager
def folder_write_lock(folder: Path) -> Iterator[None]:
    """Hold the folder's ``.lock`` as qdrant-client does (exclusive, non-blocking)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        raise SourceError(
            "writing a Qdrant folder needs POSIX file locks (fcntl); use a Qdrant server"
        ) from None
    path = folder / LOCK_FILE
    try:
        if not path.exists():
            path.write_text("tmp lock file", encoding="ascii")  # what the client writes
        handle = open(path, "r+")  # noqa: SIM115 - held for the block
    except OSError as exc:
        raise SourceError(f"cannot take {path} for writing: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SourceError(
                f"the agent is live: another process holds {path}; memtui will not write to "
                "this folder while it runs (stop the agent first, or use its Qdrant server)"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        handle.close()
