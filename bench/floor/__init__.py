"""Each request beside its floors, measured in one run: ``python -m bench.floor``."""
