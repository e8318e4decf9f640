"""Erasing a forgotten row's bytes from the heap pages it was on, not the whole table.

Plain ``VACUUM`` prunes a deleted tuple and compacts its page without zeroing the
freed space: a tuple that sat lowest in the page (nearest its free space) keeps its
bytes there. ``VACUUM FULL`` writes the table anew, but costs the whole table and
rebuilds every index (an HNSW index at 50k vectors: minutes). So the forget records
the blocks its rows were on (their ``ctid``) before the delete, and afterwards, per
block still holding the bytes:

- a no-op update of the live rows of that block (``UPDATE ... SET c = c WHERE ctid
  >= '(B,0)' AND ctid < '(B+1,0)'``, a TID range scan): each new row version is
  written from the page's free-space boundary downward, over the freed bytes (a
  heap-only update: no index changes), and the next ``VACUUM`` prunes the old
  versions; repeated until the block no longer holds the bytes (``ROUNDS``);
- a block that holds the bytes and no live row (nothing of the table can be put
  there on purpose) or bytes that stay after ``ROUNDS``: the table is rewritten
  (``VACUUM FULL``), and the outcome says so.

The blocks are read from the relation's files (1 GiB segments) after a
``CHECKPOINT``: only those 8 KiB blocks, so the check is O(blocks touched).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

BLOCK = 8192
SEGMENT_BLOCKS = 131072
"""Blocks per 1 GiB segment file of a relation (Postgres's default build)."""
ROUNDS = 4


def read_block(base: Path, block: int) -> bytes:
    """Block ``block`` of the relation whose first segment is ``base`` (``b""`` past
    its end: a block a vacuum truncated away)."""
    segment, within = divmod(block, SEGMENT_BLOCKS)
    part = base if segment == 0 else Path(f"{base}.{segment}")
    try:
        with part.open("rb") as handle:
            handle.seek(within * BLOCK)
            return handle.read(BLOCK)
    except FileNotFoundError:
        return b""


def block_range(block: int) -> str:
    """The ``WHERE`` condition of the rows of one block (a TID range scan)."""
    return f"ctid >= '({block},0)'::tid AND ctid < '({block + 1},0)'::tid"


class BlockOverwrite:
    """The overwrite rounds on the blocks of one table.

    ``count(blocks)`` reads the blocks (after a checkpoint) and returns, per block,
    how many probe bytes it holds beyond what its live rows account for; ``live(b)``
    is the number of live rows of block ``b``; ``touch(blocks)`` runs the no-op
    update of those blocks and the vacuum after it.
    """

    def __init__(
        self,
        count: Callable[[Sequence[int]], dict[int, int]],
        live: Callable[[int], int],
        touch: Callable[[Sequence[int]], None],
    ) -> None:
        self.count = count
        self.live = live
        self.touch = touch

    def run(self, blocks: Sequence[int]) -> tuple[dict[int, int], int, list[int]]:
        """Overwrite until the blocks hold no probe: returns what is left per block,
        the rounds run, and the blocks that hold the bytes and no live row."""
        left = {b: n for b, n in self.count(blocks).items() if n}
        rounds = 0
        empty: list[int] = []
        while left and rounds < ROUNDS:
            empty = [b for b in left if not self.live(b)]
            targets = [b for b in left if b not in empty]
            if not targets:
                break
            self.touch(targets)
            rounds += 1
            left = {b: n for b, n in self.count(blocks).items() if n}
        return left, rounds, [b for b in empty if b in left]
