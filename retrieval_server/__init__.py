"""Retrieval service for RAG: the asyncio gRPC orchestrator and its adapters."""

__version__ = "0.1.0"
