"""Whether the file's free pages still hold bytes of deleted content, read from the file."""

from __future__ import annotations

from pathlib import Path

from memtui.core.check.report import Checker

#: free pages read at most, to tell zeroed ones from ones holding old bytes
FREE_PAGES_INSPECTED = 65_536


def note_free_pages(checker: Checker, count: int, page_size: int) -> None:
    """Whether the free pages still hold bytes of deleted content.

    memtui writes with secure_delete on, so SQLite zeroes every page it frees;
    bytes left in a free page were freed by a writer without it (another tool,
    or the file before memtui). Read from the file itself, so only when the
    write-ahead log holds no newer pages.
    """
    path = checker.path
    advice = f"memtui compact {path} rewrites the file without them"
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 32:
        checker.note(
            "free-pages",
            f"{count} free pages, not inspected while the write-ahead log holds newer "
            f"pages; {advice}",
        )
        return
    dirty, inspected = _dirty_free_pages(path, page_size, FREE_PAGES_INSPECTED)
    if inspected is None:
        checker.note("free-pages", f"{count} free pages; their list is unreadable; {advice}")
    elif dirty:
        checker.note(
            "free-pages",
            f"{dirty} of {count} free pages still hold bytes of deleted content (freed "
            f"without secure_delete, so not by memtui); {advice}",
        )
    elif inspected < count:
        checker.note(
            "free-pages",
            f"{count} free pages; the {inspected} inspected are zeroed; {advice}",
        )
    else:
        checker.note(
            "free-pages", f"{count} free pages, all zeroed: no deleted content survives in them"
        )


def _dirty_free_pages(path: Path, page_size: int, limit: int) -> tuple[int, int | None]:
    """(free pages holding non-zero bytes, free pages inspected) read from the file.

    Walks the freelist: trunk pages (next trunk, leaf count, leaf page numbers,
    then unused slots) and their leaves. ``None`` pages inspected when the list
    is not readable (out of range, a loop).
    """
    if page_size < 512:
        return 0, None
    zero = bytes(page_size)
    dirty = 0
    inspected = 0
    seen: set[int] = set()
    with path.open("rb") as handle:
        header = handle.read(100)
        total = max(int.from_bytes(header[28:32], "big"), handle.seek(0, 2) // page_size)

        def page(number: int) -> bytes | None:
            if not 1 <= number <= total or number in seen:
                return None
            seen.add(number)
            handle.seek((number - 1) * page_size)
            data = handle.read(page_size)
            return data if len(data) == page_size else None

        trunk = int.from_bytes(header[32:36], "big")
        while trunk and inspected < limit:
            data = page(trunk)
            if data is None:
                return dirty, None
            inspected += 1
            leaves = int.from_bytes(data[4:8], "big")
            if leaves > (page_size - 8) // 4:
                return dirty, None
            # A trunk's unused slots may keep stale leaf numbers (SQLite does not
            # clear a slot it takes a leaf from): only other bytes are old content.
            tail = data[8 + 4 * leaves :]
            if tail != zero[: len(tail)] and any(
                int.from_bytes(tail[i : i + 4], "big") > total for i in range(0, len(tail), 4)
            ):
                dirty += 1
            for i in range(leaves):
                if inspected >= limit:
                    break
                leaf = page(int.from_bytes(data[8 + 4 * i : 12 + 4 * i], "big"))
                if leaf is None:
                    return dirty, None
                inspected += 1
                if leaf != zero:
                    dirty += 1
            trunk = int.from_bytes(data[0:4], "big")
    return dirty, inspected
