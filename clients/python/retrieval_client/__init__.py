"""Python client for retrieval.v1.RetrievalService (sync and asyncio).

    from retrieval_client import RetrievalClient
    with RetrievalClient("localhost:50051", user_id="alice") as client:
        response = client.query("What is small-to-big retrieval?", top_k=3)
"""

from retrieval_client.client import (
    DEFAULT_RETRIES,
    MAX_TIMEOUT_S,
    AsyncRetrievalClient,
    RetrievalClient,
    Tls,
    document_from_file,
    file_bytes,
    to_json,
)
from retrieval.v1 import retrieval_pb2 as pb

__all__ = ["DEFAULT_RETRIES", "MAX_TIMEOUT_S", "AsyncRetrievalClient", "RetrievalClient", "Tls", "document_from_file", "file_bytes", "pb", "to_json"]
