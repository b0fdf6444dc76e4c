"""The configured model's session, made on a thread of its own from the moment the settings name it.

Making an onnxruntime session does not hold the GIL (a thread counting beside one counted as fast
as alone), and takes about 130 ms for all-MiniLM-L6-v2 here. Started before the application's
modules import (``ingest --local``) or when the application is made (a server), it runs beside
those imports and beside the stores' opening (a new vector collection is about 15 ms of writes
and syncs; its payload indexes wait until it holds enough points to need them). ``Application.open``
takes the session once made, beside the stores' opening.

Without a model folder the index says which MiniLM build embeds it, so the choice waits for the
stores (``Application.open``) and there is nothing to start here.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from retrieval_server.backends.embedder import ModelFiles, new_encoder, resolve_model
from retrieval_server.backends.minilm_fp32 import default_cache_dir
from retrieval_server.backends.model_dims import remember_dim
from retrieval_server.config import Settings
from scoring_core.encoders import BiEncoder


class WrongSize(ValueError):
    """The remembered size was not the model's: only a cache edited by hand can say so."""


@dataclass(frozen=True, slots=True)
class ModelLoading:
    files: ModelFiles
    encoder: Future[BiEncoder]


@contextlib.contextmanager
def naming_the_setting(settings: Settings) -> Iterator[None]:
    """A model folder's file that cannot be used (scoring_core's ``ValueError``, which names the
    file) is refused as the setting's: the operator sets ``RETRIEVAL_MODEL_DIR``, not the file."""
    try:
        yield
    except ValueError as exc:
        if settings.model_dir is None:
            raise
        raise ValueError(f"RETRIEVAL_MODEL_DIR={settings.model_dir}: {exc}") from exc


def cache_dir(settings: Settings) -> Path | None:
    """Where a model file's digest and size are remembered; None (learnt at every start) without a home folder."""
    try:
        return settings.model_cache_dir or default_cache_dir()
    except RuntimeError:  # Path.home() of a user without a home (no HOME, no passwd entry)
        return None


def start(settings: Settings) -> ModelLoading | None:
    """The session of ``MODEL_DIR``'s model, being made; None without a model folder."""
    if settings.model_dir is None:
        return None
    cache = cache_dir(settings)
    files = resolve_model(settings.model_dir, cache)
    future: Future[BiEncoder] = Future()

    def load() -> None:
        if not future.set_running_or_notify_cancel():
            return  # nobody waits for it any more
        try:
            with naming_the_setting(settings):
                encoder = new_encoder(files, max_length=settings.max_seq_length, batch_size=settings.embed_batch_size,
                                      threads=settings.embed_threads)
            if files.dim != encoder.dim:
                remember_dim(files.model_id, encoder.dim, cache)
            if files.dim not in (None, encoder.dim):
                raise WrongSize(
                    f"{files.model_path} embeds in {encoder.dim} dimensions, but {cache} remembered {files.dim} for it (edited by "
                    f"hand?); it remembers {encoder.dim} now. If this start created its data directory, that holds vectors of "
                    "the wrong size: remove it")
        except BaseException as exc:  # whatever it is, the waiting start must hear of it
            future.set_exception(exc)
        else:
            future.set_result(encoder)

    # Not a daemon: a process that ends while onnxruntime is still making the session (a start
    # that failed early) would be torn down under it, and onnxruntime aborts the process then.
    threading.Thread(target=load, name="model-loading").start()
    return ModelLoading(files, future)
