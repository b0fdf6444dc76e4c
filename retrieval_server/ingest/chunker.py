"""Parent/child chunking by tokens of the embedding model's tokenizer, sentence-aware.

Parents (a few hundred tokens) are what callers get back; children (smaller, overlapping windows
of whole sentences inside one parent) are what gets embedded and searched. Parents never cross a
page, so a PDF context keeps its page number. A sentence longer than a child is cut at token
boundaries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from retrieval_server.domain import ChildChunk, ParentChunk
from retrieval_server.identifiers import has_visible_text
from scoring_core.encoders import read_tokenizer

#: the stops of scripts written without a space after them (CJK's 。！？, Devanagari's danda,
#: Arabic's question mark): a Chinese or Japanese paragraph was one sentence, none seen to end
STOP_ALONE = r"[。！？।॥؟]"
# A sentence ends at . ! ? and the closing quotes or brackets after it, before whitespace; at a
# stop of STOP_ALONE and its closers, space or not; or at a blank line.
#: the closing quotes and brackets a sentence's stop may have after it, the sentence's still
CLOSERS = r"[\"')\]」』）]*"
_SENTENCE_END = re.compile(rf"(?:(?<=[.!?])(?={CLOSERS}\s)|(?<={STOP_ALONE}))(?P<closers>{CLOSERS})\s*|\n\s*\n")


def _sentence_bounds(text: str) -> list[tuple[int, int]]:
    """Where each sentence of ``text`` starts and ends, its closing quotes and brackets included
    (they were cut from every sentence's end: 'He said "Stop."' lost its quote), blank ones left out."""
    bounds, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        end = m.start() + len(m.group("closers") or "")
        if text[start:end].strip():
            bounds.append((start, end))
        start = m.end()
    if text[start:].strip():
        bounds.append((start, len(text)))
    return bounds


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` as the chunker sees them, stripped, empty ones dropped."""
    return [text[s:e].strip() for s, e in _sentence_bounds(text)]


#: The chunker's revision, part of every document's fingerprint: bump it with every change to the
#: chunks it makes (their ids, texts or token counts). Without it a document re-ingested after such
#: a change counted as unchanged, or was written over its own version, and the points of chunks the
#: new chunking no longer makes stayed, cited as evidence. 1: first counted (every document stored
#: before it is written once more on its next ingest). 2: no space added between two sentences
#: the source has none between (CJK), so that a child's text is its parent's. 3: no child made of
#: the overlap alone (the next sentence not fitting beside it).
CHUNKER_REVISION = 3


@dataclass(frozen=True, slots=True)
class ChunkSizes:
    parent_tokens: int = 384
    child_tokens: int = 128
    child_overlap_tokens: int = 32


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    end: int
    #: its tokens, a token that runs past MAX_TOKEN_CHARS counting once per MAX_TOKEN_CHARS
    tokens: int


#: the longest word WordPiece splits into tokens; a longer one is a single [UNK]. A token whose
#: text (to the next token) runs longer counts as one per this many characters, so that a chunk's
#: characters are bounded with its tokens: a 3.2 MB hex dump was one child of 7 tokens, and every
#: answer citing it 9.6 MB, over a gRPC client's 4 MiB.
MAX_TOKEN_CHARS = 100


#: The longest piece of a sentence tokenized at once, and the most text tokenized in one call: a
#: longer sentence is cut at white space first (WordPiece splits there anyway), and sentences go
#: to the tokenizer this many characters at a time. Tokenized whole, 16 MiB of text without a full
#: stop took 4.7 GB: every token's Encoding, and the offsets of each in Python lists, at once.
SENTENCE_PIECE_CHARS = 1 << 16
ENCODE_CHARS = 1 << 20


def _pieces(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``text[start:end]`` in pieces of at most :data:`SENTENCE_PIECE_CHARS`, each cut after white
    space in its last half when it has some there (else at the limit: one very long word)."""
    out = []
    while end - start > SENTENCE_PIECE_CHARS:
        cut = start + SENTENCE_PIECE_CHARS
        floor = start + SENTENCE_PIECE_CHARS // 2
        while cut > floor and not text[cut - 1].isspace():
            cut -= 1
        cut = cut if cut > floor else start + SENTENCE_PIECE_CHARS
        out.append((start, cut))
        start = cut
    out.append((start, end))
    return out


def _encode_batches(bounds: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """``bounds`` in runs of at most :data:`ENCODE_CHARS` characters (at least one bound each)."""
    batches: list[list[tuple[int, int]]] = [[]]
    chars = 0
    for s, e in bounds:
        if batches[-1] and chars + (e - s) > ENCODE_CHARS:
            batches.append([])
            chars = 0
        batches[-1].append((s, e))
        chars += e - s
    return batches


def _weight(chars: int) -> int:
    return max(1, -(-chars // MAX_TOKEN_CHARS))


def _cut(start: int, end: int, token_starts: list[int], limit: int) -> list[_Span]:
    """``text[start:end]`` (one sentence, its tokens starting at ``token_starts``) in pieces of at
    most ``limit`` tokens as :data:`MAX_TOKEN_CHARS` counts them; a token longer than a child is
    cut at characters.

    Each token runs from where it starts to where the next one starts, not over its own offsets
    only: characters the tokenizer drops (combining marks under strip_accents: Devanagari vowel
    signs, Arabic vowel marks) belong to no token, and one at a cut would be lost from both chunks."""
    extents = list(zip([start, *token_starts[1:]], [*token_starts[1:], end], strict=True)) if token_starts else [(start, end)]
    pieces: list[_Span] = []
    piece, weight = start, 0
    for a, b in extents:
        w = _weight(b - a)
        if weight and weight + w > limit:
            pieces.append(_Span(piece, a, weight))
            piece, weight = a, 0
        if w > limit:
            step = limit * MAX_TOKEN_CHARS
            pieces += [_Span(c, min(c + step, b), _weight(min(c + step, b) - c)) for c in range(a, b, step)]
            piece = b
            continue
        weight += w
    if weight:
        pieces.append(_Span(piece, end, weight))
    return pieces


def _joined(text: str, spans: list[_Span]) -> str:
    """The text of ``spans`` (consecutive), each stripped, with one space where the source has white
    space between two and none where it has none. Joined with a space always, a child of Chinese
    text read '岩石。 第1段' where its parent (a slice of the source) read '岩石。第1段'. Not a slice
    itself: children have always had one space where the source has a line break or several (a
    title and its text, a blank line apart), and a slice would change nearly every stored child."""
    out: list[str] = []
    end = -1
    for s in spans:
        piece = text[s.start : s.end]
        if not (stripped := piece.strip()):
            continue
        start = s.start + len(piece) - len(piece.lstrip())
        if out and start > end:
            out.append(" ")
        out.append(stripped)
        end = start + len(stripped)
    return "".join(out)


class Chunker:
    def __init__(self, tokenizer_path: str, sizes: ChunkSizes) -> None:
        self._tok = read_tokenizer(Path(tokenizer_path))
        # Counting, not model input: no truncation, no padding, no [CLS]/[SEP].
        self._tok.no_truncation()
        self._tok.no_padding()
        self.sizes = sizes

    def count(self, text: str) -> int:
        """Tokens in ``text``, as chunks count them (no [CLS]/[SEP])."""
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def cut(self, text: str, tokens: int) -> str:
        """``text`` up to the end of its ``tokens``-th token (all of it when it has no more)."""
        encoding = self._tok.encode(text, add_special_tokens=False)
        if len(encoding.ids) <= tokens:
            return text
        return text[: encoding.offsets[tokens - 1][1]] if tokens > 0 else ""

    def _spans(self, text: str) -> list[_Span]:
        """Sentences of ``text`` as character spans, none longer than a child. Each runs from where
        the one before it ended, the white space between them included, so that its tokens (as
        :data:`MAX_TOKEN_CHARS` counts them) bound every character a chunk of them spans."""
        bounds = _sentence_bounds(text)
        if not bounds:
            return []
        bounds = [piece for i, (s, e) in enumerate(bounds) for piece in _pieces(text, bounds[i - 1][1] if i else s, e)]
        spans: list[_Span] = []
        limit = self.sizes.child_tokens
        for batch in _encode_batches(bounds):
            encs = self._tok.encode_batch([text[s:e] for s, e in batch], add_special_tokens=False)
            for (s, e), enc in zip(batch, encs, strict=True):
                # At least one token per MAX_TOKEN_CHARS of the sentence, so that a window of sentences
                # holds no more characters than its tokens allow either (each token counts at least
                # that, when cut): sentences of one long word each were two tokens apiece.
                tokens = max(len(enc.ids), _weight(e - s))
                if tokens <= limit:
                    spans.append(_Span(s, e, tokens))
                else:
                    spans += _cut(s, e, [s + a for a, _ in enc.offsets], limit)
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
            if back + spans[j].tokens > limit:
                # The next sentence does not fit beside the overlap: that window would hold the
                # overlap alone, a copy of this one's tail (0.5 % of SciFact's children, 5 % of
                # markdown's, a table or a code block being one long sentence), embedded and
                # searched twice.
                k = j
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
                content = text[group[0].start : group[-1].end].strip()
                if not has_visible_text(content):
                    continue  # pieces of a long run of white space, cut like a long word
                p_index = len(parents)
                parent_id = f"{document_id}#p{p_index}"
                parents.append(
                    ParentChunk(
                        parent_chunk_id=parent_id,
                        document_id=document_id,
                        chunk_index=p_index,
                        content=content,
                        tokens=sum(s.tokens for s in group),
                        page=page,
                    )
                )
                for window in self._windows(group, self.sizes.child_tokens, self.sizes.child_overlap_tokens):
                    child_text = _joined(text, window)
                    if not has_visible_text(child_text):
                        continue
                    c_index = len(children)
                    children.append(
                        ChildChunk(
                            chunk_id=f"{document_id}#p{p_index}c{c_index}",
                            parent_chunk_id=parent_id,
                            document_id=document_id,
                            chunk_index=c_index,
                            parent_index=p_index,
                            content=child_text,
                            tokens=sum(s.tokens for s in window),
                            page=page,
                        )
                    )
        return parents, children
