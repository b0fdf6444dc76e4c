"""Retrieval quality on BEIR datasets, measured end to end through the gRPC API."""
