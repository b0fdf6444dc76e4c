"""scoring_core benchmarks: `python -m bench.scoring` (see scoring_core/README.md)."""
