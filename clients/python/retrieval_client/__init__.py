"""Python client for retrieval.v1.RetrievalService (sync and asyncio).

    from retrieval_client import RetrievalClient
    with RetrievalClient("localhost:50051", user_id="alice") as client:
        response = client.query("What is small-to-big retrieval?", top_k=3)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval.v1 import retrieval_pb2 as pb
    from retrieval_client.client import DEFAULT_RETRIES, MAX_TIMEOUT_S, AsyncRetrievalClient, RetrievalClient, Tls, document_from_file, to_json
    from retrieval_client.files import file_bytes

#: where each name lives, imported on first use: `ingest --local` takes file_bytes alone, and
#: loading the client for it loaded gRPC and the generated code, a command that sends no RPC
_HOMES = {
    **dict.fromkeys(["DEFAULT_RETRIES", "MAX_TIMEOUT_S", "AsyncRetrievalClient", "RetrievalClient", "Tls", "document_from_file", "to_json"],
                    "retrieval_client.client"),
    "file_bytes": "retrieval_client.files",
}

__all__ = ["DEFAULT_RETRIES", "MAX_TIMEOUT_S", "AsyncRetrievalClient", "RetrievalClient", "Tls", "document_from_file", "file_bytes", "pb", "to_json"]


def __getattr__(name: str) -> Any:
    if name == "pb":
        value = importlib.import_module("retrieval.v1.retrieval_pb2")
    elif name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
    elif name in ("client", "files"):  # `retrieval_client.client.X` after a bare `import retrieval_client`, as before
        return importlib.import_module(f"retrieval_client.{name}")
    else:
        raise AttributeError(f"module 'retrieval_client' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
