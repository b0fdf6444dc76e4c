"""MTEB's document representation, to check the service against published dense numbers.

MTEB embeds each document once: title and text, truncated to the model's 256 tokens. The
service instead splits documents into overlapping children and ranks a document by its best
child, which scores higher on long documents. With ``--mteb-protocol`` the corpus is truncated
the same way before ingestion and each document becomes one child, so the service's own
tokenization, pooling and search can be compared with MTEB's number directly.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer

from retrieval_server.backends.embedder import resolve_model

#: sentence-transformers' max_seq_length for all-MiniLM-L6-v2, less [CLS] and [SEP]
MTEB_CONTENT_TOKENS = 254
MTEB_SETTINGS = {
    "RETRIEVAL_MAX_SEQ_LENGTH": "256",
    "RETRIEVAL_PARENT_CHUNK_TOKENS": "256",
    # What the model reads of a child besides [CLS] and [SEP]: the server refuses more.
    "RETRIEVAL_CHILD_CHUNK_TOKENS": str(MTEB_CONTENT_TOKENS),
    "RETRIEVAL_CHILD_OVERLAP_TOKENS": "0",
}


class Truncator:
    """Cuts a BEIR corpus line to the first ``max_tokens`` tokens of title and text together."""

    def __init__(self, model_dir: Path | None, max_tokens: int = MTEB_CONTENT_TOKENS) -> None:
        self._tok = Tokenizer.from_file(str(resolve_model(model_dir).tokenizer_path))
        self._tok.no_truncation()
        self._tok.no_padding()
        self.max_tokens = max_tokens

    def __call__(self, line: str) -> str:
        row = json.loads(line)
        title, text = str(row.get("title") or ""), str(row.get("text") or "")
        head = f"{title}\n\n" if title else ""
        offsets = self._tok.encode(head + text, add_special_tokens=False).offsets
        if len(offsets) <= self.max_tokens:
            return line
        cut = offsets[self.max_tokens - 1][1]
        row["text"] = (head + text)[len(head) : cut] if cut > len(head) else ""
        if not row["text"]:
            row["title"] = title[:cut]
        return json.dumps(row) + "\n"
