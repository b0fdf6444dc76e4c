"""The service's int8/fp32 choice beside a longer measurement of the same two models, in one run.

The choice is what a new index that times the models gets (``retrieval_server.backends.model_choice``:
5 interleaved rounds of 4 chunks and 4 queries per model, medians), timed afresh here: the
timings a machine keeps for later indexes are neither read nor written. The longer measurement times
the same two encoders, loaded the same way, on a full ingest batch of child-length texts and on
queries one at a time (best of a few calls, ``bench.scoring.timing``, two interleaved passes), so the ratios say
whether the quick check picks the model that really is faster here.

    python -m bench.floor.embedding_model
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from bench.scoring.timing import measure as best_time
from retrieval_server.backends import model_choice
from retrieval_server.backends.embedder import ModelFiles, int8_model
from retrieval_server.backends.minilm_fp32 import INSTALL, default_cache_dir, fp32_model
from retrieval_server.backends.model_choice import Precision
from retrieval_server.config import Settings
from scoring_core.encoders import BiEncoder

CHUNK_BATCH = 16
_WORDS = "retrieval systems rank passages by relevance to a question using dense and sparse signals".split()


@dataclass(frozen=True, slots=True)
class ModelChoiceRow:
    chosen: str
    check_fp32_over_int8: float
    chunks_fp32_over_int8: float  # time per batch of CHUNK_BATCH texts of about 128 tokens
    query_fp32_over_int8: float  # time per query alone
    int8_chunks_per_s: float
    fp32_chunks_per_s: float
    int8_query_ms: float
    fp32_query_ms: float

    @property
    def mix_fp32_over_int8(self) -> float:
        """The longer run's times in the check's mix: 4 chunks (a quarter of a batch) and 4 queries alone."""
        fp32 = 4 / self.fp32_chunks_per_s + 4 * self.fp32_query_ms / 1e3
        int8 = 4 / self.int8_chunks_per_s + 4 * self.int8_query_ms / 1e3
        return fp32 / int8

    @property
    def agrees(self) -> bool:
        return (self.mix_fp32_over_int8 < 1) == (self.chosen == "fp32")

    def line(self) -> str:
        return (f"embedding model for a new index: {self.chosen} (its check: fp32/int8 time {self.check_fp32_over_int8:.2f}); "
                f"longer run: chunks int8 {self.int8_chunks_per_s:.1f}/s, fp32 {self.fp32_chunks_per_s:.1f}/s "
                f"(fp32/int8 time {self.chunks_fp32_over_int8:.2f}), a query alone int8 {self.int8_query_ms:.1f} ms, "
                f"fp32 {self.fp32_query_ms:.1f} ms ({self.query_fp32_over_int8:.2f}); in the check's mix {self.mix_fp32_over_int8:.2f}: "
                + ("the choice agrees" if self.agrees else "the choice DISAGREES"))


def measure(cache_dir: Path | None = None) -> ModelChoiceRow | None:
    """None when the fp32 package is not installed (nothing to choose between)."""
    s = Settings()
    cache = cache_dir or s.model_cache_dir or default_cache_dir()
    fp32 = fp32_model(cache)
    if fp32 is None:
        return None
    int8 = int8_model()

    def load(files: ModelFiles) -> BiEncoder:
        # As the service loads them (OnnxEmbedder.load with the default settings).
        return BiEncoder(files.model_path, files.tokenizer_path, max_length=s.max_seq_length, batch_size=s.embed_batch_size, threads=s.embed_threads)

    encoders = {"int8": load(int8), "fp32": load(fp32)}
    timings = model_choice.measure({Precision(name): enc.encode for name, enc in encoders.items()})
    chunks = [" ".join(_WORDS[(i + j) % len(_WORDS)] for j in range(126)) for i in range(CHUNK_BATCH)]
    query = "which signals rank passages for a question"
    batch_s: dict[str, float] = {}
    query_s: dict[str, float] = {}
    for _ in range(2):  # interleaved, best of both passes: the machine's load drifts
        for name, enc in encoders.items():
            batch_s[name] = min(batch_s.get(name, float("inf")), best_time(lambda: enc.encode(chunks), min_time=0.0, max_reps=1, min_reps=2))  # noqa: B023
            query_s[name] = min(query_s.get(name, float("inf")), best_time(lambda: enc.encode([query]), min_time=0.3, min_reps=2))  # noqa: B023
    return ModelChoiceRow(
        chosen=timings.faster().value,
        check_fp32_over_int8=round(timings.fp32_over_int8, 3),
        chunks_fp32_over_int8=round(batch_s["fp32"] / batch_s["int8"], 3),
        query_fp32_over_int8=round(query_s["fp32"] / query_s["int8"], 3),
        int8_chunks_per_s=CHUNK_BATCH / batch_s["int8"],
        fp32_chunks_per_s=CHUNK_BATCH / batch_s["fp32"],
        int8_query_ms=query_s["int8"] * 1e3,
        fp32_query_ms=query_s["fp32"] * 1e3,
    )


def main() -> int:
    row = measure()
    if row is None:
        print(f"the fp32 model is not installed ({INSTALL}): a new index takes int8 unmeasured")
        return 0
    print(row.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
