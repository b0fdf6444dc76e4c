"""The retrieval pipeline as an explicit graph of nodes and routers."""
