"""Parent/child chunking by tokens of the embedding model's tokenizer, sentence-aware.

Parents (a few hundred tokens) are what callers get back; children (smaller, overlapping windows
of whole sentences inside one parent) are what gets embedded and searched. Parents never cross a
page, so a PDF context keeps its page number. A sentence longer than a child is cut at token
boundaries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenizers import Tokenizer

from retrieval_server.domain import ChildChunk, ParentChunk

# A sentence ends at . ! ? (plus closing quotes/brackets) before whitespace, or at a blank line.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n\s*\n")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` as the chunker sees them, stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


@dataclass(frozen=True, slots=True)
class ChunkSizes:
    parent_tokens: int = 384
    child_tokens: int = 128
    child_overlap_tokens: int = 32


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    end: int
    tokens: int


class Chunker:
    def __init__(self, tokenizer_path: str, sizes: ChunkSizes) -> None:
        self._tok = Tokenizer.from_file(tokenizer_path)
        # Counting, not model input: no truncation, no padding, no [CLS]/[SEP].
        self._tok.no_truncation()
        self._tok.no_padding()
        self.sizes = sizes

    def count(self, text: str) -> int:
        """Tokens in ``text``, as chunks count them (no [CLS]/[SEP])."""
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def _spans(self, text: str) -> list[_Span]:
        """Sentences of ``text`` as character spans, none longer than a child."""
        bounds, start = [], 0
        for m in _SENTENCE_END.finditer(text):
            if text[start : m.start()].strip():
                bounds.append((start, m.start()))
            start = m.end()
        if text[start:].strip():
            bounds.append((start, len(text)))
        if not bounds:
            return []
        encs = self._tok.encode_batch([text[s:e] for s, e in bounds], add_special_tokens=False)
        spans: list[_Span] = []
        limit = self.sizes.child_tokens
        for (s, e), enc in zip(bounds, encs, strict=True):
            n = len(enc.ids)
            if n <= limit:
                spans.append(_Span(s, e, max(n, 1)))
                continue
            # Each piece runs from where the previous one stopped to where the next one's first token
            # starts, not over its own tokens' offsets only: characters the tokenizer drops (combining
            # marks under strip_accents: Devanagari vowel signs, Arabic vowel marks) belong to no
            # token, and one at a cut would be lost from both chunks.
            offsets = enc.offsets
            cuts = list(range(0, n, limit))
            for k, i in enumerate(cuts):
                start = s if k == 0 else s + offsets[i][0]
                end = e if k == len(cuts) - 1 else s + offsets[i + limit][0]
                spans.append(_Span(start, end, min(limit, n - i)))
        return spans

    def _windows(self, spans: list[_Span], limit: int, overlap: int) -> list[list[_Span]]:
        """Greedy packing of whole sentences up to ``limit`` tokens, stepping back ``overlap``."""
        out: list[list[_Span]] = []
        i = 0
        while i < len(spans):
            j, total = i, 0
            while j < len(spans) and (j == i or total + spans[j].tokens <= limit):
                total += spans[j].tokens
                j += 1
            out.append(spans[i:j])
            if j >= len(spans):
                break
            # Start the next window with trailing sentences worth at most `overlap` tokens.
            k, back = j, 0
            while overlap and k - 1 > i and back + spans[k - 1].tokens <= overlap:
                k -= 1
                back += spans[k].tokens
            i = k
        return out

    def child_texts(self, text: str) -> list[str]:
        """The texts of the children ``text`` would be cut into as a one-page document."""
        return [c.content for c in self.chunk("text", [(1, text)])[1]]

    def chunk(
        self, document_id: str, pages: list[tuple[int, str]]
    ) -> tuple[list[ParentChunk], list[ChildChunk]]:
        parents: list[ParentChunk] = []
        children: list[ChildChunk] = []
        for page, text in pages:
            spans = self._spans(text)
            for group in self._windows(spans, self.sizes.parent_tokens, 0):
                p_index = len(parents)
                parent_id = f"{document_id}#p{p_index}"
                parents.append(
                    ParentChunk(
                        parent_chunk_id=parent_id,
                        document_id=document_id,
                        chunk_index=p_index,
                        content=text[group[0].start : group[-1].end].strip(),
                        tokens=sum(s.tokens for s in group),
                        page=page,
                    )
                )
                for window in self._windows(group, self.sizes.child_tokens, self.sizes.child_overlap_tokens):
                    c_index = len(children)
                    children.append(
                        ChildChunk(
                            chunk_id=f"{document_id}#p{p_index}c{c_index}",
                            parent_chunk_id=parent_id,
                            document_id=document_id,
                            chunk_index=c_index,
                            parent_index=p_index,
                            content=" ".join(text[s.start : s.end].strip() for s in window),
                            tokens=sum(s.tokens for s in window),
                            page=page,
                        )
                    )
        return parents, children
