"""Ingestion: loaders turn files into text, the chunker into parents and children, the indexer stores them."""
