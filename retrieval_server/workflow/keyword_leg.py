"""The keyword leg: BM25 over the chunks, the title as a weighted field, optional RM3 feedback.

Long input is bounded: the query's first ``query_max_terms`` distinct terms are searched (a
64 KiB text has thousands; each term is a posting list the engine walks).

RM3 (Abdul-Jaleel et al. 2004; Lavrenko and Croft's relevance model interpolated with the
query): the top ``prf_docs`` hits of a first pass give a feedback model
p(t|R) = sum_d p(t|d) * p(d|q), with p(t|d) from each hit's BM25 term weights normalized to sum
to 1 and p(d|q) from the hits' scores normalized to sum to 1. Its ``prf_terms`` heaviest terms
are mixed with the query (each side normalized to sum to 1): weight ``prf_query_weight`` for the
query, the rest for the feedback terms. The engine applies IDF to the expanded query as to any
other. Defaults are Anserini's RM3 defaults (10 documents, 10 terms, 0.5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from retrieval_server.backends.sparse import Bm25Encoder
from retrieval_server.backends.vector_store import VectorStore
from retrieval_server.domain import PointFilter, SparseVector, VectorHit

#: a run of letters and digits: what the BM25 tokenizer makes one token of, in most scripts
_RUN = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class KeywordOptions:
    titled: bool = True
    max_terms: int = 512
    prf_docs: int = 0
    prf_terms: int = 10
    prf_query_weight: float = 0.5


def query_vector(sparse: Bm25Encoder, text: str, max_terms: int) -> SparseVector:
    """The query's BM25 terms: its first ``max_terms`` distinct ones in text order, ids ascending."""
    v = sparse.query(text)
    if len(v.indices) <= max_terms:
        return v
    # The encoder lists term ids in id order (a hash of the term), so a cut of its list keeps
    # whichever terms hash lowest, not the ones the query starts with. Its tokenizer never puts a
    # token across white space, and mostly splits at every character that is not a letter or digit:
    # each word's runs of those, encoded alone, give its terms in text order. Not where a run ends
    # inside a token: Python's \w leaves out combining marks, which the tokenizer keeps in a word
    # (Devanagari's vowel signs), and such a word's runs gave other terms than the word's own, so a
    # long Hindi query kept none of its own (or, when another word had those terms, lost this
    # word's). Then the word's terms are taken whole. A word may also hold more terms than its
    # runs (a code's joined term, "192q168q1q10"): they come after the runs'. The runs are read up
    # to the bound only: this runs on the event loop, and a 64 KiB word without white space is
    # thousands of runs, each encoded alone (ten times what encoding the whole query took).
    weight = dict(zip(v.indices, v.values, strict=True))
    first: dict[int, None] = {}
    for word in dict.fromkeys(text.split()):
        whole = sparse.query(word).indices
        own = set(whole)
        for run in _RUN.finditer(word):
            terms = sparse.query(run.group()).indices
            if not own.issuperset(terms):
                break
            first.update((t, None) for t in terms if t in weight)
            if len(first) >= max_terms:
                break
        first.update((t, None) for t in whole if t in weight)
        if len(first) >= max_terms:
            break
    kept = sorted(list(first)[:max_terms])
    return SparseVector(tuple(kept), tuple(weight[t] for t in kept))


def rm3(query: SparseVector, feedback: list[tuple[SparseVector, float]], terms: int, query_weight: float) -> SparseVector:
    """The query interpolated with the relevance model of the feedback documents (vector, score)."""
    total_score = sum(max(s, 0.0) for _, s in feedback)
    if not feedback or total_score <= 0:
        return query
    model: dict[int, float] = {}
    for doc, score in feedback:
        mass = sum(doc.values)
        if mass <= 0:
            continue
        p_d = max(score, 0.0) / total_score
        for t, w in zip(doc.indices, doc.values, strict=True):
            model[t] = model.get(t, 0.0) + p_d * w / mass
    top = sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))[:terms]
    top_mass = sum(w for _, w in top)
    q_mass = sum(query.values)
    if top_mass <= 0 or q_mass <= 0:
        return query
    mixed: dict[int, float] = {t: query_weight * w / q_mass for t, w in zip(query.indices, query.values, strict=True)}
    for t, w in top:
        mixed[t] = mixed.get(t, 0.0) + (1 - query_weight) * w / top_mass
    order = sorted(mixed)
    return SparseVector(tuple(order), tuple(mixed[t] for t in order))


async def search(
    vectors: VectorStore, sparse: Bm25Encoder, text: str | SparseVector, limit: int, flt: PointFilter, options: KeywordOptions
) -> list[VectorHit]:
    """``text``, or its :func:`query_vector` when the caller has made it already."""
    q = query_vector(sparse, text, options.max_terms) if isinstance(text, str) else text
    hits = await vectors.search_sparse(q, limit, flt, titled=options.titled)
    if options.prf_docs <= 0 or not hits:
        return hits
    top = hits[: options.prf_docs]
    expanded = rm3(q, [(sparse.document(h.content), h.score) for h in top], options.prf_terms, options.prf_query_weight)
    return await vectors.search_sparse(expanded, limit, flt, titled=options.titled)
