"""The cross-encoder of the rerank scenario: a real one when given, else one built with its shape."""

from __future__ import annotations

from pathlib import Path

from bench.quality.index import RESULTS
from scoring_core.model_builder import build_cross_encoder


def reranker_dir(given: Path | None) -> tuple[Path, str]:
    """(model folder, what it is). No weights can be downloaded here, so the default costs what a real one costs but ranks at random."""
    if given is not None:
        return given.resolve(), f"{given} (given)"
    d = RESULTS / "load-cross-encoder"
    if not (d / "model.onnx").is_file():
        d.mkdir(parents=True, exist_ok=True)
        build_cross_encoder(d / "model.onnx")
    return d, "built here: ms-marco-MiniLM-L-6-v2 shape (6 layers, hidden 384), random weights: real cost, meaningless scores"
