"""The settings of a server under load: the index, the worker count and the cores split between them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def available_cores() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def server_settings(base: Mapping[str, str], index_dir: Path, processes: int, reranker: Path, rerank_candidates: int,
                    **overrides: str) -> dict[str, str]:
    return {
        **base,
        "RETRIEVAL_DATA_DIR": str(index_dir),
        "RETRIEVAL_PROCESSES": str(processes),
        "RETRIEVAL_RERANKER_MODEL_DIR": str(reranker),
        "RETRIEVAL_RERANK_CANDIDATES": str(rerank_candidates),
        # The cores are split between the processes instead of oversubscribed.
        "RETRIEVAL_EMBED_THREADS": str(max(1, available_cores() // processes)),
        "RETRIEVAL_LOG_LEVEL": "WARNING",
        # Every cell on a server asks the same queries from the first, so remembered (query, text)
        # scores would answer the rerank stage from the second cell on: the reranked rows would time
        # a dictionary lookup, not the cross-encoder (and bench.floor's rerank row, held to the raw
        # model on the same pairs, would compare nothing).
        "RETRIEVAL_RERANK_PAIR_CACHE": "0",
        **overrides,
    }
