"""Load benchmarks: ghz configurations and a grpc.aio load generator over a SciFact index."""
