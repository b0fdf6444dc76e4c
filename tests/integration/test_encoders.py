"""ONNX cross-encoder and int8 quantization, on models the tests build themselves."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from retrieval_server.backends.embedder import BUNDLED_TOKENIZER, int8_model
from scoring_core.encoders import BiEncoder, CrossEncoder, Interrupted, Interruption, by_token_count, position_limit
from scoring_core.model_builder import BertShape, build_cross_encoder, build_sentence_encoder, random_weights
from scoring_core.quantize import quantize_int8
from tests.support.paths import REPO, fp32_model_dir

TINY = BertShape(hidden=32, layers=2, heads=2, intermediate=64)
QUERY = "how many people live in berlin"
PASSAGES = [
    "Berlin has a population of about 3.7 million people.",
    "The cat sat on the mat.",
    "Paris is the capital of France and has many museums along the river.",
    "Population figures for German cities are published every year by the statistics office.",
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_cross_encoder(tmp_path_factory.mktemp("ce") / "model.onnx", TINY, seed=1, init_std=0.3)


def _direct(model: Path, query: str, passage: str, max_length: int = 512) -> float:
    return float(_direct_logits(model, query, passage, max_length)[0])


def _direct_logits(model: Path, query: str, passage: str, max_length: int = 512) -> np.ndarray:
    """One pair's logits through onnxruntime by hand: the oracle for batching and padding."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(BUNDLED_TOKENIZER))
    tok.no_padding()
    tok.enable_truncation(max_length, strategy="only_second")
    enc = tok.encode(query, passage)
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feeds = {
        "input_ids": np.array([enc.ids], dtype=np.int64),
        "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
        "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
    }
    return sess.run(None, feeds)[0][0]


def test_scores_match_a_direct_onnxruntime_call(tiny_model: Path) -> None:
    ce = CrossEncoder(tiny_model, BUNDLED_TOKENIZER, batch_size=3)
    scores = ce.score(QUERY, PASSAGES)
    assert scores.shape == (4,) and scores.dtype == np.float32
    expected = np.array([_direct(tiny_model, QUERY, p) for p in PASSAGES], dtype=np.float32)
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-5)
    assert np.argsort(-scores).tolist() == np.argsort(-expected).tolist()


def test_padding_and_batch_order_do_not_change_scores(tiny_model: Path) -> None:
    ce = CrossEncoder(tiny_model, BUNDLED_TOKENIZER, batch_size=8)
    alone = np.array([ce.score(QUERY, [p])[0] for p in PASSAGES])
    together = ce.score(QUERY, PASSAGES + ["a much longer passage " * 40])
    np.testing.assert_allclose(together[:4], alone, rtol=1e-4, atol=1e-5)


def test_only_the_passage_is_truncated(tiny_model: Path) -> None:
    ce = CrossEncoder(tiny_model, BUNDLED_TOKENIZER, max_length=48)
    long_passage = "berlin " * 500
    enc = ce.tokenizer.encode(QUERY, long_passage)
    assert len(enc.ids) == 48
    assert enc.type_ids.count(0) == len(ce._counter.encode(QUERY, add_special_tokens=False).ids) + 2  # [CLS] q [SEP]
    long_query = "population " * 300
    assert ce.score(long_query, [long_passage, "short"]).shape == (2,)  # capped query, no truncation error
    capped = ce._cap_query(long_query)
    assert len(ce._counter.encode(capped, add_special_tokens=False).ids) == 24


def test_a_query_cap_that_leaves_the_passage_no_token_is_refused_at_start_up(tiny_model: Path) -> None:
    """max_length 64 less [CLS] and two [SEP] leaves 61: a query of 61 tokens or more failed every
    long query at score time with the tokenizers library's bare Exception."""
    long_query, long_passage = "population " * 300, "berlin " * 300
    ce = CrossEncoder(tiny_model, BUNDLED_TOKENIZER, max_length=64, max_query_tokens=60)
    assert ce.score(long_query, [long_passage]).shape == (1,)
    for cap in (61, 200, 0, -3):
        with pytest.raises(ValueError, match=re.escape(f"max_query_tokens must be 1 to 60 (max_length 64 less a pair's 3 special tokens and "
                                                       f"one passage token), got {cap}")):
            CrossEncoder(tiny_model, BUNDLED_TOKENIZER, max_length=64, max_query_tokens=cap)


def test_rerank_semantics_and_sigmoid(tiny_model: Path) -> None:
    raw = CrossEncoder(tiny_model, BUNDLED_TOKENIZER)
    ranked = raw.rerank(QUERY, PASSAGES)
    assert sorted(i for i, _ in ranked) == [0, 1, 2, 3]
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    sig = CrossEncoder(tiny_model, BUNDLED_TOKENIZER, activation="sigmoid").score(QUERY, PASSAGES)
    np.testing.assert_allclose(sig, 1 / (1 + np.exp(-raw.score(QUERY, PASSAGES))), rtol=1e-5)
    assert raw.score(QUERY, []).shape == (0,)


def test_a_two_label_classifier_scores_its_softmax_probability_of_relevance(tmp_path: Path) -> None:
    """[irrelevant, relevant] logits: the last one alone ranked (5, 3), P 0.12, above (0, 2), P 0.88."""
    model = build_cross_encoder(tmp_path / "model.onnx", TINY, seed=1, init_std=0.3, labels=2)
    logits = np.array([_direct_logits(model, QUERY, p) for p in PASSAGES], dtype=np.float64)
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    ce = CrossEncoder(model, BUNDLED_TOKENIZER, activation="sigmoid", batch_size=3)
    assert ce.labels == 2
    scores = ce.score(QUERY, PASSAGES)
    np.testing.assert_allclose(scores, softmax[:, 1], rtol=1e-4, atol=1e-5)
    assert np.argsort(-softmax[:, 1]).tolist() != np.argsort(-logits[:, 1]).tolist(), "the model must tell the two apart"
    assert [i for i, _ in ce.rerank(QUERY, PASSAGES)] == np.argsort(-softmax[:, 1], kind="stable").tolist()
    raw = CrossEncoder(model, BUNDLED_TOKENIZER).score(QUERY, PASSAGES)
    np.testing.assert_allclose(raw, logits[:, 1] - logits[:, 0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("labels", [1, 2])
def test_logits_beyond_the_float32_sigmoids_reach_keep_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, labels: int
) -> None:
    """Logits 10..26 (a two-label model's margins): in float32 the sigmoid of every one above ~17
    is 1.0, and rerank put those in input order."""
    model = build_cross_encoder(tmp_path / "model.onnx", TINY, seed=1, init_std=0.3, labels=labels)
    logits = [13, 25, 10, 22, 17, 26, 11, 19, 24, 14, 21, 12, 16, 23, 18, 15, 20]
    passages = [" ".join(["word"] * (i + 1)) for i in range(len(logits))]  # passage i: i + 1 tokens
    ce = CrossEncoder(model, BUNDLED_TOKENIZER, activation="sigmoid", batch_size=4)

    def given(encodings: list[Any]) -> np.ndarray:
        margin = np.array([logits[len(e.ids) - len(QUERY.split()) - 4] for e in encodings], dtype=np.float32)  # less [CLS], 2 [SEP]
        return margin[:, None] if labels == 1 else np.stack([np.full_like(margin, -3.0), margin - 3.0], axis=1)

    monkeypatch.setattr(ce, "_logits", given)
    best_first = sorted(range(len(logits)), key=lambda i: -logits[i])
    scores = ce.score(QUERY, passages)
    assert np.argsort(-scores, kind="stable").tolist() == best_first
    np.testing.assert_allclose(scores, 1 / (1 + np.exp(-np.array(logits, dtype=np.float64))), rtol=1e-15)
    assert [i for i, _ in ce.rerank(QUERY, passages)] == best_first
    assert ce.logits(QUERY, passages).tolist() == logits


def test_a_model_of_one_squeezed_label_scores_like_its_batch_by_one_twin(tmp_path: Path, tiny_model: Path) -> None:
    """Logits [batch], not [batch, 1]: start-up took .shape[1] of its probe, a bare IndexError."""
    model = build_cross_encoder(tmp_path / "model.onnx", TINY, seed=1, init_std=0.3, squeeze=True)
    ce = CrossEncoder(model, BUNDLED_TOKENIZER, batch_size=3)
    assert ce.labels == 1
    np.testing.assert_array_equal(ce.score(QUERY, PASSAGES), CrossEncoder(tiny_model, BUNDLED_TOKENIZER, batch_size=3).score(QUERY, PASSAGES))


def test_a_model_of_another_output_rank_is_refused_by_name_and_shape(tmp_path: Path) -> None:
    model = build_sentence_encoder(tmp_path / "model.onnx", random_weights(1, 0.3), TINY)
    with pytest.raises(ValueError, match=re.escape(f"{model} has the output shape ['batch', 'sequence', 32]: expected logits [batch, labels]")):
        CrossEncoder(model, BUNDLED_TOKENIZER)


def test_a_model_of_more_than_two_labels_is_refused_by_name(tmp_path: Path) -> None:
    model = build_cross_encoder(tmp_path / "three" / "model.onnx", TINY, seed=1, labels=3)
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'three' / 'model.onnx'} has 3 logits per pair")):
        CrossEncoder(model, BUNDLED_TOKENIZER)


def test_int8_cross_encoder_keeps_the_ranking_signal(tiny_model: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    words = ["berlin", "population", "city", "cat", "river", "museum", "people", "statistics", "mat", "france"]
    passages = [" ".join(rng.choice(words, size=12)) for _ in range(64)]
    int8 = quantize_int8(tiny_model, tmp_path / "int8.onnx")
    a = CrossEncoder(tiny_model, BUNDLED_TOKENIZER).score(QUERY, passages)
    b = CrossEncoder(int8, BUNDLED_TOKENIZER).score(QUERY, passages)
    assert a.std() > 1e-2, "the test model's scores must vary for the comparison to mean anything"
    assert np.corrcoef(a, b)[0, 1] >= 0.98


def _model_folder(model: Path, folder: Path) -> Path:
    folder.mkdir()
    (folder / "model.onnx").write_bytes(model.read_bytes())
    (folder / "tokenizer.json").write_bytes(BUNDLED_TOKENIZER.read_bytes())
    return folder


def test_quantize_into_its_own_folder_is_refused_and_leaves_the_model(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """quantize SRC SRC overwrote the fp32 model with its int8 copy, then failed on the tokenizer's copy."""
    from retrieval_server import cli

    src = _model_folder(tiny_model, tmp_path / "src")
    fp32 = (src / "model.onnx").read_bytes()
    (tmp_path / "link").symlink_to(src)
    monkeypatch.chdir(tmp_path)
    for target in (str(src), "src/", "./src", str(tmp_path / "link")):
        assert cli.main(["quantize", str(src), target]) == 1
        assert f"error: TARGET {Path(target)} is SOURCE {src}" in capsys.readouterr().err
    assert (src / "model.onnx").read_bytes() == fp32 and sorted(p.name for p in src.iterdir()) == ["model.onnx", "tokenizer.json"]
    assert cli.main(["quantize", str(src), "int8"]) == 0
    assert (tmp_path / "int8" / "model.onnx").read_bytes() != fp32 and (tmp_path / "int8" / "tokenizer.json").is_file()


def test_an_interrupted_quantization_leaves_no_partial_model(tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model was written in place: Ctrl-C or a failure half-way left a truncated model.onnx."""
    import os

    def cut_short(fd: int) -> None:
        raise KeyboardInterrupt  # after the model's bytes were written, before the file was renamed

    monkeypatch.setattr(os, "fsync", cut_short)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        quantize_int8(tiny_model, out / "model.onnx")
    assert list(out.iterdir()) == []
    (out / "model.onnx").write_bytes(b"an earlier int8 model")
    with pytest.raises(KeyboardInterrupt):
        quantize_int8(tiny_model, out / "model.onnx")
    assert [p.name for p in out.iterdir()] == ["model.onnx"] and (out / "model.onnx").read_bytes() == b"an earlier int8 model"


def test_a_quantized_text_embeds_alike_alone_and_in_any_batch(tmp_path: Path) -> None:
    """Dynamic quantization scaled activations over the whole batch: a text's vector depended on
    the texts embedded beside it (cosine to itself alone down to 0.9865 on MiniLM)."""
    fp32 = build_sentence_encoder(tmp_path / "fp32.onnx", random_weights(1, 0.3), TINY)
    encoder = BiEncoder(quantize_int8(fp32, tmp_path / "int8.onnx"), BUNDLED_TOKENIZER, batch_size=8)
    texts = [QUERY, *PASSAGES, "CYP2C19*2 rs4244285 c.681G>A p.P227P", "a much longer passage with 99 numbers " * 6]
    encodings = encoder.tokenizer.encode_batch(texts)
    assert len({len(e.ids) for e in encodings}) > 4
    batched = encoder._run(encodings)  # one batch, padded to its longest text
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    np.testing.assert_allclose(batched, alone, rtol=0, atol=1e-6)
    assert float(np.min(np.sum(batched * BiEncoder(fp32, BUNDLED_TOKENIZER).encode(texts), axis=1))) >= 0.99


def test_int8_bi_encoder_fidelity(tmp_path: Path) -> None:
    src = fp32_model_dir() / "model.onnx"
    int8 = quantize_int8(src, tmp_path / "int8.onnx")
    texts = [*PASSAGES, QUERY, "Graduation requires one hundred and twenty credits.", "Lava flows reshape coastlines."]
    a = BiEncoder(src, BUNDLED_TOKENIZER).encode(texts)
    b = BiEncoder(int8, BUNDLED_TOKENIZER).encode(texts)
    cos = (a * b).sum(axis=1)
    assert cos.min() >= 0.98 and cos.mean() >= 0.99
    # The neighbourhood structure survives: same nearest passage for the query.
    assert int(np.argmax(a[:4] @ a[4])) == int(np.argmax(b[:4] @ b[4])) == 0


def test_bi_encoder_batches_by_tokens_without_changing_an_embedding() -> None:
    """Characters per token vary (digits, formulas): ordered by tokens, each text's embedding is
    the one it gets alone."""
    files = int8_model()
    encoder = BiEncoder(files.model_path, files.tokenizer_path, batch_size=2)
    texts = [*PASSAGES, QUERY, "CYP2C19*2 rs4244285 c.681G>A p.P227P", "Hydroxychloroquine", "a b c d e f g h i j k l"]
    lengths = [len(e.ids) for e in encoder.tokenizer.encode_batch(texts)]
    assert sorted(range(len(texts)), key=lengths.__getitem__) != sorted(range(len(texts)), key=lambda i: len(texts[i]))
    together = encoder.encode(texts)
    alone = np.vstack([encoder.encode([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    widths: list[int] = []
    run = encoder._run

    def recorded(encodings: list[Any], interruption: Interruption | None = None) -> np.ndarray:
        widths.append(max(len(e.ids) for e in encodings))
        return run(encodings, interruption)

    encoder._run = recorded  # type: ignore[method-assign]
    encoder.encode(texts)
    batches = by_token_count(encoder.tokenizer.encode_batch(texts), 2)
    assert widths == [max(lengths[i] for i in b) for b in batches]
    assert [lengths[i] for b in batches for i in b] == sorted(lengths)


def test_an_interrupted_run_raises_and_leaves_the_session_serving() -> None:
    files = int8_model()
    encoder = BiEncoder(files.model_path, files.tokenizer_path, batch_size=2)
    texts = [*PASSAGES, QUERY]
    plain = encoder.encode(texts)
    assert np.array_equal(encoder.encode(texts, Interruption()), plain), "an interruption never used changes nothing"
    stopped = Interruption()
    stopped.interrupt()  # before the run: onnxruntime refuses it at its first node
    with pytest.raises(Interrupted) as caught:
        encoder.encode(texts, stopped)
    assert "terminate" in str(caught.value.__cause__)
    assert np.array_equal(encoder.encode(texts), plain)


def test_a_max_length_beyond_the_position_table_is_cut_to_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """RETRIEVAL_RERANK_MAX_TOKENS may be 8192: past the model's positions a long passage failed the
    whole rerank with onnxruntime's broadcast error."""
    model = build_cross_encoder(tmp_path / "model.onnx", BertShape(hidden=32, layers=1, heads=2, intermediate=64, max_positions=64), seed=1,
                                init_std=0.3)
    long = "Berlin has 3.7 million people. " * 30
    with caplog.at_level(logging.WARNING, logger="scoring_core.encoders"):
        ce = CrossEncoder(model, BUNDLED_TOKENIZER, max_length=128)
    assert ce.max_length == 64 and "max_length 128 is beyond the 64 positions" in caplog.text
    scores = ce.score(QUERY, [long, PASSAGES[1]])
    assert np.isfinite(scores).all()
    assert scores.tolist() == CrossEncoder(model, BUNDLED_TOKENIZER, max_length=64).score(QUERY, [long, PASSAGES[1]]).tolist()
    assert CrossEncoder(model, BUNDLED_TOKENIZER, max_length=32).max_length == 32  # below the table: as asked
    # A config.json beside the model is read first (RoBERTa-style models count positions from padding id + 1).
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlm-roberta", "max_position_embeddings": 50, "pad_token_id": 1}))
    assert position_limit(model) == 48 and CrossEncoder(model, BUNDLED_TOKENIZER, max_length=128).max_length == 48
    # MPNet (all-mpnet-base-v2) numbers positions so too; a null padding id is RoBERTa's 1; a
    # config.json that is not JSON leaves the graph to tell.
    for config, limit in (({"model_type": "mpnet", "max_position_embeddings": 50, "pad_token_id": 1}, 48),
                          ({"model_type": "roberta", "max_position_embeddings": 50, "pad_token_id": None}, 48)):
        (tmp_path / "config.json").write_text(json.dumps(config))
        assert position_limit(model) == limit, config
    (tmp_path / "config.json").write_text("{not json")
    assert position_limit(model) == 64


def test_the_local_reranker_names_the_setting_it_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from retrieval_server.backends.executor import BlockingExecutor
    from retrieval_server.backends.reranker import OnnxReranker

    build_cross_encoder(tmp_path / "model.onnx", BertShape(hidden=32, layers=1, heads=2, intermediate=64, max_positions=64), seed=1)
    executor = BlockingExecutor(1)
    try:
        with caplog.at_level(logging.WARNING):
            OnnxReranker(tmp_path, executor, max_tokens=8192)
    finally:
        executor.shutdown()
    assert "RETRIEVAL_RERANK_MAX_TOKENS=8192" in caplog.text and "64 tokens" in caplog.text


@pytest.mark.parametrize("config", [{"model_type": "xlm-roberta", "vocab_size": 250002}, {"model_type": "bert", "vocab_size": 1000},
                                    {"model_type": "roberta"}])
def test_a_model_folder_without_a_tokenizer_the_bundled_one_does_not_fit_is_refused(tmp_path: Path, config: dict[str, Any]) -> None:
    """The bundled MiniLM tokenizer fed an XLM-R model ids of other words, and a smaller vocabulary ids past its table."""
    from retrieval_server.backends.embedder import resolve_model
    from retrieval_server.backends.executor import BlockingExecutor
    from retrieval_server.backends.reranker import OnnxReranker

    build_cross_encoder(tmp_path / "model.onnx", BertShape(hidden=32, layers=1, heads=2, intermediate=64), seed=1)
    (tmp_path / "config.json").write_text(json.dumps(config))
    refusal = re.escape(f"model folder {tmp_path} has no tokenizer.json")
    executor = BlockingExecutor(1)
    try:
        with pytest.raises(ValueError, match=refusal):
            OnnxReranker(tmp_path, executor)
        with pytest.raises(ValueError, match=refusal):
            resolve_model(tmp_path)
        for family in ("bert", "distilbert", "electra"):  # where it fits: BERT's uncased WordPiece, as before the check
            (tmp_path / "config.json").write_text(json.dumps({"model_type": family, "vocab_size": 30522}))
            assert resolve_model(tmp_path).tokenizer_path == BUNDLED_TOKENIZER
            OnnxReranker(tmp_path, executor)
        (tmp_path / "config.json").write_text(json.dumps(config))
        (tmp_path / "tokenizer.json").write_bytes(BUNDLED_TOKENIZER.read_bytes())  # the folder's own is taken as it is
        assert resolve_model(tmp_path).tokenizer_path == tmp_path / "tokenizer.json"
    finally:
        executor.shutdown()


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path, tiny_model: Path) -> None:
    """onnxruntime's and the tokenizers library's own errors did not all name the file."""
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"")
    with pytest.raises(ValueError, match=re.escape(f"cannot load the ONNX model {broken}: ")):
        BiEncoder(broken, BUNDLED_TOKENIZER)
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{not json")
    for load in (BiEncoder, CrossEncoder):
        with pytest.raises(ValueError, match=re.escape(f"cannot read the tokenizer {tokenizer}: key must be a string")):
            load(tiny_model, tokenizer)


def test_a_cross_encoder_is_refused_as_a_sentence_encoder(tiny_model: Path) -> None:
    """Its logits, [batch, 1], were taken for vectors of one dimension: an index of 1-dimensional
    vectors, and every ingest failed on numpy's broadcast error."""
    with pytest.raises(ValueError, match=re.escape(f"{tiny_model} is no sentence encoder: its output 'logits' has the shape ['batch', 1]")):
        BiEncoder(tiny_model, BUNDLED_TOKENIZER)


def test_a_sentence_encoder_of_fewer_positions_is_cut_to_them_at_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Without a config.json nothing checked the positions: the model loaded, and every text longer
    than its table failed ("Attempting to broadcast an axis by a dimension other than 1. 64 by 102")."""
    model = build_sentence_encoder(tmp_path / "model.onnx", random_weights(0, 0.02), BertShape(hidden=32, layers=1, heads=2,
                                                                                                intermediate=64, max_positions=64))
    with caplog.at_level(logging.WARNING, logger="scoring_core.encoders"):
        encoder = BiEncoder(model, BUNDLED_TOKENIZER, max_length=128)
    assert encoder.max_length == 64 and encoder.dim == 32 and "max_length 128 is beyond the 64 positions" in caplog.text
    long = "Berlin has 3.7 million people. " * 30
    assert np.array_equal(encoder.encode([long]), BiEncoder(model, BUNDLED_TOKENIZER, max_length=64).encode([long]))
    # A caller that knows the positions (the MiniLM builds) spares the run: the setting stands as given.
    assert BiEncoder(model, BUNDLED_TOKENIZER, max_length=128, positions=512).max_length == 128


def test_an_onnxruntime_without_8_bit_matmulnbits_is_named_with_the_version_needed(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """onnxruntime 1.21 has no 8-bit quantizer (nor kernel): quantize_int8 failed on a bare import of a private name."""
    import tomllib

    from onnxruntime.capi import _pybind_state
    from scoring_core.quantize import MIN_ONNXRUNTIME

    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"onnxruntime>={MIN_ONNXRUNTIME}" in dependencies
    installed = tuple(int(part) for part in ort.__version__.split(".")[:2])
    assert installed >= tuple(int(part) for part in MIN_ONNXRUNTIME.split("."))
    monkeypatch.delattr(_pybind_state, "quantize_matmul_8bits")
    monkeypatch.setattr(ort, "__version__", "1.21.1")
    with pytest.raises(ImportError, match=re.escape(f"quantize_int8 needs onnxruntime>={MIN_ONNXRUNTIME} (8-bit MatMulNBits), found 1.21.1")):
        quantize_int8(tiny_model, tmp_path / "int8.onnx")
