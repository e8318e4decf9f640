"""The raw-numpy baseline the vector lane is measured against, shared by the benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def numpy_cosine_top(matrix: Any, norms: Any, query: Sequence[float], k: int) -> tuple[Any, Any]:
    """Raw numpy's top ``k`` rows by cosine and their cosines, on the lane's own matrix and
    the row norms stored with it: the float32 product with the unit query, divided by the
    norms in place, ``argpartition``, the ``k`` sorted."""
    unit = np.asarray(query, dtype=np.float32)
    unit /= np.float32(np.linalg.norm(unit))
    scores = matrix @ unit
    scores /= norms
    top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
    top = top[np.argsort(-scores[top])]
    return top, scores[top]
