"""Fused-feedback RM3 on a tuning split: RM3 whose feedback documents are the first HYBRID fusion's
best documents instead of BM25's own best hits.

    python -m bench.quality.feedback --dataset /work/quality-indexes/pydoc-long \\
        --index-dir /work/quality-indexes/pydoc-long-index --pool 160

The service's RM3 (``RETRIEVAL_PRF_DOCS``) takes its feedback from the keyword leg's first
pass; HYBRID's fused ranking is better than that pass (SciFact 0.722 against KEYWORD's 0.661), so
its best documents should be better feedback (as in hybrid pseudo-relevance feedback). Each
query's legs are retrieved once with the service's code (``bench.quality.tune.retrieve_all``);
for every setting the expanded query is searched on the keyword leg, which it replaces, and the
legs are fused again with the service's fusion. Prints nDCG@10 of the baseline and each setting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

from bench.provenance import provenance
from bench.quality.tune import Retrieved, _run, replay_inputs, replay_parser, retrieve_all, score
from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import AccessFilter, PointFilter
from retrieval_server.workflow import keyword_leg

#: (feedback documents, expansion terms, the query's share): Anserini's RM3 default first
SETTINGS = ((10, 10, 0.5), (5, 10, 0.5), (3, 10, 0.5), (10, 20, 0.5), (10, 10, 0.7), (5, 10, 0.7))


async def first_pass(app: Application, retrieved: dict[str, Retrieved]) -> dict[str, dict[str, float]]:
    """HYBRID RRF with the service's settings, no feedback: the baseline and the feedback's source."""
    s = app.pipeline.deps.settings
    return await _run(app, retrieved, rrf_k=s.rrf_k, parent="on" if s.parent_leg else "off", keyword="keyword", policy=None)


async def fused_feedback(app: Application, queries: dict[str, str], retrieved: dict[str, Retrieved], first: dict[str, dict[str, float]],
                         pool: int, setting: tuple[int, int, float]) -> dict[str, dict[str, float]]:
    """``first``: the first pass (:func:`first_pass`), whose best documents are the feedback."""
    docs, terms, query_weight = setting
    deps = app.pipeline.deps
    s = deps.settings
    everything = PointFilter(access=AccessFilter(reads_everything=True))
    again: dict[str, Retrieved] = {}
    for qid, r in retrieved.items():
        best = sorted(first[qid].items(), key=lambda kv: -kv[1])[:docs]
        # A feedback document is what the legs returned of it: its retrieved chunks, each once.
        feedback = []
        for rank, (doc_id, _) in enumerate(best):
            chunks = {h.chunk_id: h.content for hits in r.legs.values() for h in hits if h.document_id == doc_id}
            feedback.append((deps.sparse.document(" ".join(chunks.values())), 1.0 / (s.rrf_k + rank + 1)))
        q = keyword_leg.query_vector(deps.sparse, queries[qid], s.keyword.max_terms)
        expanded = keyword_leg.rm3(q, feedback, terms, query_weight)
        legs = dict(r.legs)
        legs["keyword:0"] = await deps.vectors.search_sparse(expanded, pool, everything, titled=s.keyword.titled)
        again[qid] = dataclasses.replace(r, legs=legs)
    return await first_pass(app, again)


def main(argv: list[str] | None = None) -> int:
    p = replay_parser("python -m bench.quality.feedback", __doc__)
    p.add_argument("--pool", type=int, default=160, help="child hits per leg (top_k 20 contexts x 8)")
    args = p.parse_args(argv)
    if (inputs := replay_inputs(args)) is None:
        return 2
    dataset, overrides = inputs

    async def go() -> list[dict[str, object]]:
        app = Application(load_settings(**overrides))
        await app.open()
        try:
            queries, qrels = dataset.queries(), dataset.qrels()
            retrieved = await retrieve_all(app, queries, args.pool, keyword_variants=False)
            first = await first_pass(app, retrieved)
            rows: list[dict[str, object]] = [{"feedback": "off", "ndcg@10": score(qrels, first)}]
            for setting in SETTINGS:
                run = await fused_feedback(app, queries, retrieved, first, args.pool, setting)
                rows.append({"feedback": dict(zip(("docs", "terms", "query_weight"), setting, strict=True)), "ndcg@10": score(qrels, run)})
                print(json.dumps(rows[-1]), flush=True)
            return rows
        finally:
            await app.close()

    result = {**provenance(), "dataset": dataset.name, "split": dataset.split, "rows": asyncio.run(go())}
    if args.output:
        args.output.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
