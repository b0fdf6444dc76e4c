"""ONNX encoders: tokenizers + onnxruntime, no torch at run time.

The bi-encoder reproduces sentence-transformers' all-MiniLM-L6-v2 pipeline: WordPiece tokens
(max 256), the transformer, mean pooling over the attention mask, L2 normalization. Pooling and
normalization are ours because the exported graph stops at ``last_hidden_state``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

log = logging.getLogger(__name__)

#: Models that number positions from their padding id + 1: XLM-R's 514 positions hold 512 tokens
#: (so do MPNet's, all-mpnet-base-v2's among them).
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "mpnet", "longformer", "data2vec-text")


def model_config(model_path: Path) -> dict[str, Any]:
    """The ``config.json`` beside ``model_path``; empty when there is none or it cannot be read
    (what it would say is then checked on the model itself)."""
    config = model_path.parent / "config.json"
    try:
        c = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    except (OSError, ValueError):
        return {}
    return c if isinstance(c, dict) else {}


def position_limit(model_path: Path, *, graph: bool = True) -> int | None:
    """The most tokens the model at ``model_path`` takes: ``max_position_embeddings`` of the
    ``config.json`` beside it, else (with ``graph``) the rows of the graph's position-embedding
    table (an initializer named for it, or the one gathered at a ``Range`` of positions); None when
    neither tells. Past it the position look-up fails the whole batch with an opaque broadcast
    error. Reading the graph parses the whole file with the onnx package (protobuf): a file it
    cannot parse is left to onnxruntime, whose error says what is wrong with it."""
    c = model_config(model_path)
    if isinstance(c.get("max_position_embeddings"), int):
        pad = c.get("pad_token_id")
        offset = (pad if isinstance(pad, int) else 1) + 1 if c.get("model_type") in _OFFSET_POSITIONS else 0
        return int(c["max_position_embeddings"]) - offset
    if not graph:
        return None
    import onnx

    try:
        model = onnx.load(str(model_path), load_external_data=False).graph
    except Exception:  # protobuf's DecodeError, OSError, ...: the session says it better
        return None
    tables = {t.name: int(t.dims[0]) for t in model.initializer if len(t.dims) == 2}
    for name, rows in tables.items():
        if "position_embeddings" in name:
            return rows
    ranges = {out for n in model.node if n.op_type == "Range" for out in n.output}
    for n in model.node:
        if n.op_type == "Gather" and n.input[0] in tables and n.input[1] in ranges:
            return tables[n.input[0]]
    return None


def fit_positions(model_path: Path, max_length: int, *, limit: int | None = None) -> int:
    """``max_length``, or the most tokens the model takes when that is lower (with a warning):
    ``limit``, else its :func:`position_limit`. A server whose token setting passes its model's
    table still starts, and truncates there."""
    limit = limit if limit is not None else position_limit(model_path)
    if limit is None or max_length <= limit:
        return max_length
    log.warning("max_length %d is beyond the %d positions of %s: texts are truncated at %d tokens", max_length, limit, model_path, limit)
    return limit


def read_tokenizer(path: Path) -> Tokenizer:
    """The ``tokenizer.json`` at ``path``; ``ValueError`` naming the file when it cannot be read (the
    tokenizers library's own error names no file: "key must be a string at line 1 column 2")."""
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the library raises a bare Exception
        raise ValueError(f"cannot read the tokenizer {path}: {exc}") from exc


def load_tokenizer(path: Path, max_length: int) -> Tokenizer:
    """Load ``tokenizer.json`` with truncation at ``max_length`` and no padding.

    The upstream file pads every text to 128 tokens; each batch is padded here to its own longest
    text (:func:`padded`), which gives identical embeddings and far less work.
    """
    tok = read_tokenizer(path)
    tok.enable_truncation(max_length)
    tok.no_padding()
    return tok


def pad_id(tokenizer: Tokenizer) -> int:
    pad = tokenizer.token_to_id("[PAD]")
    return 0 if pad is None else pad


def padded(encodings: Sequence[Encoding], pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``input_ids``, ``attention_mask`` and ``token_type_ids`` of unpadded encodings, each row
    padded on the right to the longest of them."""
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad, dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, e in enumerate(encodings):
        n = len(e.ids)
        ids[row, :n] = e.ids
        mask[row, :n] = 1
        types[row, :n] = e.type_ids
    return ids, mask, types


#: The most padding a batch may carry, as a share of its texts' own tokens (see :func:`by_token_count`).
MAX_PADDING = 0.25


def by_token_count(encodings: Sequence[Encoding], batch_size: int, max_padding: float = MAX_PADDING) -> list[list[int]]:
    """Indexes of ``encodings`` in batches of at most ``batch_size``, in order of token count: a
    batch pads to its longest member, so neighbours in length pad least. Ordered by characters
    instead, the batches of 200 SciFact documents' chunks padded 13 % more tokens and took 13 %
    longer (characters per token vary with numbers, formulas and names).

    A batch also ends before a text that would make it pad more than ``max_padding`` of its own
    tokens. Padding is computed like any token and thrown away, while another run costs little
    beside it: the two documents of a small ingest (ten children of 107-158 tokens, four parents of
    256) took 258-283 ms as one batch padded to 256 and 183-193 ms as two runs. Over 320 chunks of
    60 NFCorpus documents in pieces of 32, ``max_padding`` 0.25, 0.5, 0 and unbounded took the same
    time within the runs' spread (2.9-3.3 s), as did 1,018 SciFact chunks (9.0-9.3 s): the bound
    only cuts where lengths jump.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
    batches: list[list[int]] = []
    batch: list[int] = []
    tokens = 0
    for i in order:
        n = len(encodings[i].ids)  # the longest yet: the batch would pad every member to it
        if batch and (len(batch) == batch_size or (len(batch) + 1) * n > (1 + max_padding) * (tokens + n)):
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(i)
        tokens += n
    if batch:
        batches.append(batch)
    return batches


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
    try:
        return ort.InferenceSession(str(model_path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own kinds (InvalidProtobuf, InvalidArgument, ...), whose text not all name the file
        raise ValueError(f"cannot load the ONNX model {model_path}: {exc}") from exc


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
        At most this many texts per inference call.
    threads : int or None
        onnxruntime intra-op threads; None lets onnxruntime choose.
    positions : int or None
        The most tokens the model takes, when the caller knows it; else a ``config.json`` beside
        the model tells, or one run of ``max_length`` tokens checks it.
    """

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        threads: int | None = None,
        positions: int | None = None,
    ) -> None:
        # Its length is held to 512 by the settings, which BERT-style models take; a config.json
        # says otherwise. The graph is not read up front: it cost the ingest command protobuf and a
        # parse of the whole model before the first text.
        known = positions if positions is not None else position_limit(model_path, graph=False)
        max_length = fit_positions(model_path, max_length, limit=known) if known is not None else max_length
        self.tokenizer = load_tokenizer(tokenizer_path, max_length)
        self._pad_id = pad_id(self.tokenizer)
        self.session = _session(model_path, threads)
        self.batch_size = batch_size
        self.max_length = max_length
        self._input_names = {i.name for i in self.session.get_inputs()}
        out = self.session.get_outputs()[0]
        if len(out.shape) != 3:
            # A cross-encoder's logits, [batch, labels], were taken for vectors of `labels` dimensions,
            # and every ingest failed on numpy's broadcast error.
            raise ValueError(f"{model_path} is no sentence encoder: its output {out.name!r} has the shape {out.shape}, where "
                             "mean pooling needs the tokens' states, [batch, sequence, dim] (last_hidden_state)")
        vocab = model_config(model_path).get("vocab_size")
        if isinstance(vocab, int) and self.tokenizer.get_vocab_size() > vocab:
            raise ValueError(f"the tokenizer {tokenizer_path} has {self.tokenizer.get_vocab_size()} tokens, more than the "
                             f"vocab_size {vocab} of {model_path.parent / 'config.json'}: its higher ids are past the model's table")
        if known is None:
            # Past the model's positions every run fails, and only at the first long text; the
            # graph is read only when that run fails.
            self._fit_length(model_path)
        self.dim = self._probe_vocabulary(model_path, tokenizer_path)

    def _probe(self, tokens: int) -> None:
        """One run of one text of ``tokens`` tokens (at most ``max_length``)."""
        self._run(self.tokenizer.encode_batch([" ".join(["probe"] * tokens)]))

    def _probe_vocabulary(self, model_path: Path, tokenizer_path: Path) -> int:
        """The embedding size, from one run of two rows, one holding the tokenizer's highest id. A
        model that cannot take the feeds (int32 ids), a batch of two, or every id the tokenizer
        makes was accepted at start-up, then failed every embedding: ingestion failed, and queries
        lost their dense leg. A few milliseconds."""
        ids, mask, types = padded(self.tokenizer.encode_batch(["probe", "probe"]), self._pad_id)
        ids[1, -1] = self.tokenizer.get_vocab_size() - 1
        try:
            return int(self._infer(ids, mask, types).shape[1])
        except Exception as exc:  # onnxruntime's own kinds, whose text names neither file
            raise ValueError(f"{model_path} cannot embed what the tokenizer {tokenizer_path} makes (ids up to "
                             f"{self.tokenizer.get_vocab_size() - 1}, a batch of two): {exc}") from exc

    def _fit_length(self, model_path: Path) -> None:
        """Checks a run of ``max_length`` tokens; when that fails, ``max_length`` is cut to the
        graph's position table (with a warning) if that is shorter, else refused."""
        try:
            self._probe(self.max_length)
            return
        except Exception as exc:
            limit = position_limit(model_path)
            if limit is None or limit >= self.max_length:
                raise ValueError(f"{model_path} fails on a text of {self.max_length} tokens: {exc}") from exc
        self.max_length = fit_positions(model_path, self.max_length, limit=limit)
        self.tokenizer.enable_truncation(self.max_length)
        self._probe(self.max_length)

    def _run(self, encodings: list[Encoding], interruption: Interruption | None = None) -> np.ndarray:
        return self._infer(*padded(encodings, self._pad_id), interruption)

    def _infer(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray, interruption: Interruption | None = None) -> np.ndarray:
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = types
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
        encodings = self.tokenizer.encode_batch(list(texts))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for n, idx in enumerate(by_token_count(encodings, self.batch_size)):
            if n and interruption is not None and interruption.interrupted:
                raise Interrupted("interrupted between batches")
            out[idx] = self._run([encodings[i] for i in idx], interruption)
        return out


class CrossEncoder:
    """(query, passage) relevance from an ONNX BERT-style sequence-classification model.

    Loads any Hugging Face cross-encoder exported to ONNX (``model.onnx`` with inputs
    ``input_ids``/``attention_mask``/``token_type_ids`` and output ``logits`` ``[batch, labels]``,
    or ``[batch]`` for one label, plus its ``tokenizer.json``), e.g. cross-encoder/ms-marco-MiniLM-L-6-v2.

    Pairs are tokenized together ([CLS] query [SEP] passage [SEP]); only the passage is truncated,
    after the query was capped at ``max_query_tokens``. Pairs are batched in order of length so a
    batch pads to similar lengths. A score is the relevance logit (one label, the ms-marco
    convention) or, for a softmax classifier of two labels ``[irrelevant, relevant]``, the margin
    ``relevant - irrelevant``, whose sigmoid is its softmax probability of relevance; raw, or its
    sigmoid with ``activation``. A model of more labels raises ``ValueError``.
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
        max_length = fit_positions(model_path, max_length)
        self.max_length = max_length
        self.batch_size = batch_size
        self.activation = activation
        self.tokenizer = read_tokenizer(tokenizer_path)
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length, strategy="only_second")
        # Past this, truncating the passage alone cannot fit the pair, and every long query failed
        # at score time with the tokenizers library's bare Exception.
        specials = self.tokenizer.num_special_tokens_to_add(True)
        upper = max_length - specials - 1
        self.max_query_tokens = max_length // 2 if max_query_tokens is None else max_query_tokens
        if not 1 <= self.max_query_tokens <= upper:
            raise ValueError(f"max_query_tokens must be 1 to {upper} (max_length {max_length} less a pair's {specials} special "
                             f"tokens and one passage token), got {self.max_query_tokens}")
        self._counter = read_tokenizer(tokenizer_path)
        self._counter.no_padding()
        self._counter.no_truncation()
        self._pad_id = pad_id(self.tokenizer)
        self.session = _session(model_path, threads)
        self._input_names = {i.name for i in self.session.get_inputs()}
        shape = self.session.get_outputs()[0].shape
        if len(shape) not in (1, 2):
            raise ValueError(f"the cross-encoder {model_path} has the output shape {shape}: expected logits [batch, labels], "
                             "or [batch] (one score per pair)")
        # [batch] is one label, squeezed by the export; _logits makes it [batch, 1].
        width = shape[1] if len(shape) == 2 else 1
        self.labels = width if isinstance(width, int) else self._logits(self.tokenizer.encode_batch([("label probe", "probe")])).shape[1]
        if self.labels not in (1, 2):
            raise ValueError(f"the cross-encoder {model_path} has {self.labels} logits per pair: only one (relevance) "
                             "or two ([irrelevant, relevant]) can be read as relevance")

    def _cap_query(self, query: str) -> str:
        enc = self._counter.encode(query, add_special_tokens=False)
        if len(enc.ids) <= self.max_query_tokens:
            return query
        return query[: enc.offsets[self.max_query_tokens - 1][1]]

    def _logits(self, encodings: list[Encoding]) -> np.ndarray:
        ids, mask, types = padded(encodings, self._pad_id)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = types
        return np.asarray(self.session.run(None, feeds)[0]).reshape(len(encodings), -1)

    def _run(self, encodings: list[Encoding]) -> np.ndarray:
        logits = self._logits(encodings)
        if self.labels == 2:
            # The 'relevant' logit alone ranks a pair with logits (5, 3), P(relevant) 0.12, above
            # one with (0, 2), 0.88; the margin ranks by that probability.
            return (logits[:, 1] - logits[:, 0]).astype(np.float32)
        return np.asarray(logits[:, 0], dtype=np.float32)

    def logits(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One float32 raw score per passage, in the input order: the relevance logit, or a
        two-label model's margin, whatever ``activation`` says."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        q = self._cap_query(query)
        encodings = self.tokenizer.encode_batch([(q, p) for p in passages])
        out = np.empty(len(passages), dtype=np.float32)
        for idx in by_token_count(encodings, self.batch_size):
            out[idx] = self._run([encodings[i] for i in idx])
        return out

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One score per passage, in the input order: the float32 :meth:`logits`, or with
        ``activation`` "sigmoid" their float64 sigmoid. float32 holds nothing between 1 - 6e-8 and
        1, so every logit above ~17 would score 1.0 and the order among them would be lost."""
        return self._activated(self.logits(query, passages))

    def _activated(self, logits: np.ndarray) -> np.ndarray:
        if self.activation == "sigmoid":
            return 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
        return logits

    def rerank(self, query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
        """TEI ``/rerank`` semantics: ``[(index, score), ...]`` best first, one per input text."""
        logits = self.logits(query, texts)
        scores = self._activated(logits)
        # Ranked on the logits: even in float64 the sigmoid of every logit above ~37 is 1.0.
        order = np.argsort(-logits, kind="stable")
        return [(int(i), float(scores[i])) for i in order]
