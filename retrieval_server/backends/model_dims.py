"""Models' embedding sizes, remembered by model id (the digest of the model's file).

A starting process needs the size of its vectors before the vector store opens (a new collection
is created with it), and a model folder only tells it once the model's session is made. Known
beforehand, the session is made while the stores open and the application imports
(:mod:`retrieval_server.model_loading`); the first start with a new model file waits for it.
Keyed by the file's digest, a size can only be stale if the cache file is edited by hand, and
then binding the model refuses it (``OnnxEmbedder.use``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from retrieval_server.backends.file_digest import read_entries, write_whole

log = logging.getLogger(__name__)

CACHE_FILE = "model-dims.json"
#: Models remembered at most; the oldest are forgotten first.
KEPT = 32


def known_dim(model_id: str, cache_dir: Path | None) -> int | None:
    if cache_dir is None:
        return None
    dim = read_entries(cache_dir / CACHE_FILE).get(model_id)
    return dim if isinstance(dim, int) and not isinstance(dim, bool) and dim > 0 else None


def remember_dim(model_id: str, dim: int, cache_dir: Path | None) -> None:
    """A cache that cannot be written only costs the next start its overlap."""
    if cache_dir is None:
        return
    cache = cache_dir / CACHE_FILE
    entries = read_entries(cache)
    entries.pop(model_id, None)
    entries[model_id] = dim
    try:
        write_whole(cache, dict(list(entries.items())[-KEPT:]))
    except OSError as exc:
        log.debug("not remembering the size of %s in %s: %s", model_id, cache_dir, exc)
