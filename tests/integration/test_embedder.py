"""The default int8 model and a configured fp32 model give the same geometry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retrieval_server.backends.embedder import OnnxEmbedder, resolve_model
from retrieval_server.backends.executor import BlockingExecutor
from tests.support.paths import fp32_model_dir

TEXTS = [
    "How many people live in Berlin?",
    "Berlin has a population of 3.5 million",
    "The cat sat on the mat",
    "Small-to-big retrieval returns parent chunks around matching child chunks. " * 8,
]


@pytest.fixture(scope="module")
def pool() -> Iterator[BlockingExecutor]:
    ex = BlockingExecutor(1)
    yield ex
    ex.shutdown()


async def test_default_model_comes_from_the_wheel(pool: BlockingExecutor) -> None:
    emb = OnnxEmbedder(resolve_model(None), pool, threads=2)
    v = await emb.embed(TEXTS)
    assert v.shape == (4, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # Reference values of the int8 model (shared/models/README.md).
    assert v[0] @ v[1] == pytest.approx(0.8078, abs=2e-3)
    assert v[0] @ v[2] == pytest.approx(-0.0475, abs=2e-3)


async def test_batching_and_padding_do_not_change_embeddings(pool: BlockingExecutor) -> None:
    emb = OnnxEmbedder(resolve_model(None), pool, threads=2, batch_size=3)
    together = await emb.embed(TEXTS)
    alone = np.concatenate([await emb.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert (await emb.embed([])).shape == (0, 384)


async def test_configured_fp32_model_overrides_and_agrees(pool: BlockingExecutor) -> None:
    fp32 = OnnxEmbedder(resolve_model(fp32_model_dir()), pool, threads=2)
    int8 = OnnxEmbedder(resolve_model(None), pool, threads=2)
    assert fp32.model_id != int8.model_id
    a, b = await fp32.embed(TEXTS), await int8.embed(TEXTS)
    assert a[0] @ a[1] == pytest.approx(0.8085, abs=1e-3)
    assert float(np.min(np.sum(a * b, axis=1))) >= 0.999


async def test_a_model_chosen_later_is_bound_once_known(pool: BlockingExecutor, tmp_path: Path) -> None:
    from scoring_core.model_builder import BertShape, build_sentence_encoder, random_weights

    emb = OnnxEmbedder(None, pool, threads=2)
    assert emb.dim == 384 and emb.model_id == ""
    with pytest.raises(RuntimeError, match="no embedding model chosen"):
        await emb.embed(TEXTS)
    narrow = build_sentence_encoder(tmp_path / "model.onnx", random_weights(0, 0.02), BertShape(hidden=32, layers=1, heads=2, intermediate=64))
    with pytest.raises(ValueError, match="32 dimensions, the index needs 384"):
        emb.use(resolve_model(narrow.parent))
    emb.use(resolve_model(None))
    assert emb.model_id == resolve_model(None).model_id and (await emb.embed(TEXTS)).shape == (4, 384)


def _record_runs(emb: OnnxEmbedder) -> list[tuple[int, int]]:
    """(intra-op threads of the session, texts) of every model run from now on."""
    runs: list[tuple[int, int]] = []
    emb.load_narrow()
    for encoder in (emb._encoder, emb._narrow):  # noqa: SLF001
        assert encoder is not None
        run = encoder.session.run
        threads = encoder.session.get_session_options().intra_op_num_threads
        encoder.session.run = lambda *a, run=run, threads=threads, **k: (runs.append((threads, len(a[1]["input_ids"]))), run(*a, **k))[1]  # type: ignore[method-assign]
    return runs


async def test_an_embedding_beside_other_work_runs_on_one_thread_and_agrees(pool: BlockingExecutor) -> None:
    emb = OnnxEmbedder(resolve_model(None), pool, threads=2)
    runs = _record_runs(emb)
    wide = await emb.embed(TEXTS)
    beside = await emb.embed(TEXTS, beside_work=True)
    # Every text once on two threads, then once on one (the long text in a run of its own).
    assert sum(n for t, n in runs if t == 2) == len(TEXTS) == sum(n for t, n in runs if t == 1)
    assert [t for t, _ in runs] == sorted((t for t, _ in runs), reverse=True)
    np.testing.assert_allclose(wide, beside, atol=1e-5)
    single = OnnxEmbedder(resolve_model(None), pool, threads=1)
    assert single._narrow is single._encoder  # noqa: SLF001  # one thread already: no second session
    lazy = OnnxEmbedder(resolve_model(None), pool, threads=2)
    assert lazy._narrow is None  # noqa: SLF001  # loaded when first needed
    np.testing.assert_allclose(await lazy.embed(TEXTS, beside_work=True), wide, atol=1e-5)
    assert lazy._narrow is not None  # noqa: SLF001
