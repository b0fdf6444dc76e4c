"""ONNX encoders: tokenizers + onnxruntime, no torch at run time.

The bi-encoder reproduces sentence-transformers' all-MiniLM-L6-v2 pipeline: WordPiece tokens
(max 256), the transformer, mean pooling over the attention mask, L2 normalization. Pooling and
normalization are ours because the exported graph stops at ``last_hidden_state``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer


def load_tokenizer(path: Path, max_length: int) -> Tokenizer:
    """Load ``tokenizer.json`` and reset its truncation/padding for dynamic batches.

    The upstream file pads every text to 128 tokens; padding to the longest text in the batch
    gives identical embeddings and far less work.
    """
    tok = Tokenizer.from_file(str(path))
    tok.enable_truncation(max_length)
    pad_id = tok.token_to_id("[PAD]")
    tok.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
    return tok


class Interrupted(RuntimeError):
    """A model run stopped by :meth:`Interruption.interrupt` before it finished; nothing was returned."""


class Interruption:
    """Lets another thread stop a model run between two graph nodes (onnxruntime's
    ``RunOptions.terminate``, which the CPU provider checks after every node: about a millisecond
    on MiniLM, where a run of one 128-token text takes tens of them). One per run."""

    def __init__(self) -> None:
        self.options = ort.RunOptions()
        self.interrupted = False

    def interrupt(self) -> None:
        """Safe from any thread, before, during or after the run."""
        self.interrupted = True
        self.options.terminate = True


def _session(model_path: Path, threads: int | None) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    # Idle intra-op threads sleep instead of spinning: a server's event loop, its other model runs
    # and its neighbours need those cycles. Measured on the 2-core VM under load: a query embedding
    # 24 -> 14 ms (2 threads), batches 63 -> 80 texts/s.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(model_path), sess_options=opts, providers=["CPUExecutionProvider"])


class BiEncoder:
    """Sentence embeddings from an ONNX BERT-style encoder.

    Parameters
    ----------
    model_path : Path
        ``model.onnx`` with inputs ``input_ids``, ``attention_mask`` (and optionally
        ``token_type_ids``) and output ``last_hidden_state`` ``[batch, seq, dim]``.
    tokenizer_path : Path
        The model's ``tokenizer.json``.
    max_length : int
        Truncation length in tokens (sentence-transformers uses 256 for this model).
    batch_size : int
        Texts per inference call.
    threads : int or None
        onnxruntime intra-op threads; None lets onnxruntime choose.
    """

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        self.tokenizer = load_tokenizer(tokenizer_path, max_length)
        self.session = _session(model_path, threads)
        self.batch_size = batch_size
        self.max_length = max_length
        self._input_names = {i.name for i in self.session.get_inputs()}
        out = self.session.get_outputs()[0]
        self.dim = int(out.shape[-1]) if isinstance(out.shape[-1], int) else self._probe_dim()

    def _probe_dim(self) -> int:
        return int(self._run(self.tokenizer.encode_batch(["dimension probe"])).shape[1])

    def _run(self, encodings: list[Encoding], interruption: Interruption | None = None) -> np.ndarray:
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        if interruption is None:
            hidden = self.session.run(None, feeds)[0]
        else:
            try:
                hidden = self.session.run(None, feeds, interruption.options)[0]
            except Exception as exc:
                if interruption.interrupted:
                    raise Interrupted("the model run was interrupted") from exc
                raise
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def encode(self, texts: Sequence[str], interruption: Interruption | None = None) -> np.ndarray:
        """Embed ``texts``; returns float32 ``[len(texts), dim]`` rows of unit length.

        Raises :class:`Interrupted` when ``interruption`` is interrupted before the last batch ends.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Sort by length so each batch pads to similar lengths, then restore the input order.
        lengths = [len(t) for t in texts]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            if start and interruption is not None and interruption.interrupted:
                raise Interrupted("interrupted between batches")
            out[idx] = self._run(self.tokenizer.encode_batch([texts[i] for i in idx]), interruption)
        return out


class CrossEncoder:
    """(query, passage) relevance from an ONNX BERT-style sequence-classification model.

    Loads any Hugging Face cross-encoder exported to ONNX (``model.onnx`` with inputs
    ``input_ids``/``attention_mask``/``token_type_ids`` and output ``logits`` ``[batch, labels]``,
    plus its ``tokenizer.json``), e.g. cross-encoder/ms-marco-MiniLM-L-6-v2.

    Pairs are tokenized together ([CLS] query [SEP] passage [SEP]); only the passage is truncated,
    after the query was capped at ``max_query_tokens``. Pairs are batched in order of length so a
    batch pads to similar lengths. Scores are raw logits (the ms-marco convention) or their sigmoid.
    """

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        *,
        max_length: int = 512,
        max_query_tokens: int | None = None,
        batch_size: int = 32,
        threads: int | None = None,
        activation: str = "none",
    ) -> None:
        if activation not in ("none", "sigmoid"):
            raise ValueError("activation must be 'none' or 'sigmoid'")
        self.max_length = max_length
        self.max_query_tokens = max_query_tokens or max_length // 2
        self.batch_size = batch_size
        self.activation = activation
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length, strategy="only_second")
        self._counter = Tokenizer.from_file(str(tokenizer_path))
        self._counter.no_padding()
        self._counter.no_truncation()
        pad = self.tokenizer.token_to_id("[PAD]")
        self._pad_id = 0 if pad is None else pad
        self.session = _session(model_path, threads)
        self._input_names = {i.name for i in self.session.get_inputs()}

    def _cap_query(self, query: str) -> str:
        enc = self._counter.encode(query, add_special_tokens=False)
        if len(enc.ids) <= self.max_query_tokens:
            return query
        return query[: enc.offsets[self.max_query_tokens - 1][1]]

    def _run(self, encodings: list[Encoding]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
            types[row, :n] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = types
        logits = self.session.run(None, feeds)[0]
        # One label: the relevance logit. Several (e.g. [irrelevant, relevant]): the last.
        return np.asarray(logits[:, -1], dtype=np.float32)

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One score per passage, in the input order."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        q = self._cap_query(query)
        encodings = self.tokenizer.encode_batch([(q, p) for p in passages])
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out = np.empty(len(passages), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([encodings[i] for i in idx])
        if self.activation == "sigmoid":
            out = (1.0 / (1.0 + np.exp(-out.astype(np.float64)))).astype(np.float32)
        return out

    def rerank(self, query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
        """TEI ``/rerank`` semantics: ``[(index, score), ...]`` best first, one per input text."""
        scores = self.score(query, texts)
        order = np.argsort(-scores, kind="stable")
        return [(int(i), float(scores[i])) for i in order]
