"""Encoder throughput: texts/s (bi-encoder) and pairs/s (cross-encoder), fp32 vs int8
(``quantize_int8``: MatMulNBits, 8-bit weights in blocks, activations quantized per row).

The bi-encoder is the fp32 all-MiniLM-L6-v2 from ../shared; the cross-encoder is a graph with the
exact shape of cross-encoder/ms-marco-MiniLM-L-6-v2 built by scoring_core.model_builder (random
weights: no real ones can be obtained here; the cost does not depend on them). With the
``bench-torch`` extra installed, sentence-transformers runs the same architectures on torch with
the same thread count.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.scoring.timing import measure
from scoring_core.encoders import BiEncoder, CrossEncoder
from scoring_core.model_builder import build_cross_encoder
from scoring_core.quantize import quantize_int8

WORDS = "retrieval systems rank passages by relevance to a question using dense and sparse signals".split()


@dataclass
class EncoderRow:
    model: str
    runtime: str
    tokens: int
    batch: int
    per_s: float


def _text(tokens: int) -> str:
    # ~1 token per word for this vocabulary.
    return " ".join(WORDS[i % len(WORDS)] for i in range(tokens))


def prepare_models(model_dir: Path, work: Path) -> dict[str, Path]:
    work.mkdir(parents=True, exist_ok=True)
    bi32 = model_dir / "model.onnx"
    ce32 = build_cross_encoder(work / "cross-fp32.onnx")
    return {
        "bi-fp32": bi32,
        "bi-int8": quantize_int8(bi32, work / "bi-int8.onnx"),
        "cross-fp32": ce32,
        "cross-int8": quantize_int8(ce32, work / "cross-int8.onnx"),
    }


def onnx_rows(models: dict[str, Path], tokenizer: Path, threads: int, lengths: tuple[int, ...], batches: tuple[int, ...]) -> Iterator[EncoderRow]:
    for name, path in models.items():
        kind, precision = name.split("-")
        for batch in batches:
            if kind == "bi":
                enc = BiEncoder(path, tokenizer, threads=threads, batch_size=batch, max_length=512)
            else:
                enc_ce = CrossEncoder(path, tokenizer, threads=threads, batch_size=batch)
            for tokens in lengths:
                n = max(batch, 32 if tokens <= 128 else 16)
                if kind == "bi":
                    texts = [_text(tokens - 2)] * n
                    secs = measure(lambda: enc.encode(texts), min_time=0.5, max_reps=5, min_reps=2)  # noqa: B023
                else:
                    passages = [_text(tokens - 8)] * n
                    secs = measure(lambda: enc_ce.score("which signals rank passages", passages), min_time=0.5, max_reps=5, min_reps=2)  # noqa: B023
                yield EncoderRow(f"{kind}-encoder", f"onnx {precision}", tokens, batch, n / secs)


def torch_rows(threads: int, lengths: tuple[int, ...], batch: int) -> Iterator[EncoderRow]:
    """sentence-transformers baselines, when the bench-torch extra is installed: the same architecture
    with random weights (throughput does not depend on the weights)."""
    try:
        import torch
        from sentence_transformers import CrossEncoder as StCrossEncoder
        from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast
    except ImportError:
        return
    torch.set_num_threads(threads)
    tmp = Path(tempfile.mkdtemp(prefix="st-ce-"))
    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(tmp)
    tok_src = Path(__file__).resolve().parents[2] / "retrieval_server" / "resources" / "all-MiniLM-L6-v2" / "tokenizer.json"
    BertTokenizerFast(tokenizer_file=str(tok_src)).save_pretrained(tmp)
    model = StCrossEncoder(str(tmp), device="cpu", max_length=512)
    bi = _st_bi_encoder(tmp, config)
    for tokens in lengths:
        n = max(batch, 32 if tokens <= 128 else 16)
        texts = [_text(tokens - 2)] * n
        secs = measure(lambda: bi.encode(texts, batch_size=batch, show_progress_bar=False), min_time=0.5, max_reps=5, min_reps=2)  # noqa: B023
        yield EncoderRow("bi-encoder", "sentence-transformers (torch)", tokens, batch, n / secs)
    for tokens in lengths:
        n = max(batch, 32 if tokens <= 128 else 16)
        pairs = [("which signals rank passages", _text(tokens - 8))] * n
        secs = measure(lambda: model.predict(pairs, batch_size=batch, show_progress_bar=False), min_time=0.5, max_reps=5, min_reps=2)  # noqa: B023
        yield EncoderRow("cross-encoder", "sentence-transformers (torch)", tokens, batch, n / secs)


def _st_bi_encoder(tokenizer_dir: Path, config: object):  # type: ignore[no-untyped-def]
    """all-MiniLM-L6-v2's architecture in sentence-transformers: BERT, mean pooling, normalization."""
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertModel

    tmp = Path(tempfile.mkdtemp(prefix="st-bi-"))
    BertModel(config).save_pretrained(tmp)  # type: ignore[arg-type]
    for f in tokenizer_dir.iterdir():
        if "token" in f.name or f.name == "vocab.txt":
            (tmp / f.name).write_bytes(f.read_bytes())
    transformer = models.Transformer(str(tmp), max_seq_length=512)
    return SentenceTransformer(modules=[transformer, models.Pooling(384, "mean"), models.Normalize()], device="cpu")
