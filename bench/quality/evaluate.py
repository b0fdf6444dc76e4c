"""Run every test query through the Query RPC and score the rankings with ir-measures."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import grpc
import ir_measures
import numpy as np
from ir_measures import MRR, R, nDCG
from tqdm import tqdm

from bench.transport import PLAINTEXT, Transport
from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc as rpc

MEASURES = {"ndcg@10": nDCG @ 10, "recall@100": R @ 100, "mrr@10": MRR @ 10}


@dataclass(frozen=True, slots=True)
class Variant:
    """One row of the table: a strategy with its fusion and whether the cross-encoder reranks."""

    name: str
    strategy: int
    fusion: int = pb.FUSION_UNSPECIFIED
    rerank: bool = False


VARIANTS = {
    "semantic": Variant("semantic", pb.STRATEGY_SEMANTIC),
    "keyword": Variant("keyword", pb.STRATEGY_KEYWORD),
    "hybrid-rrf": Variant("hybrid-rrf", pb.STRATEGY_HYBRID, pb.FUSION_RRF),
    "hybrid-weighted": Variant("hybrid-weighted", pb.STRATEGY_HYBRID, pb.FUSION_WEIGHTED),
    "adaptive": Variant("adaptive", pb.STRATEGY_ADAPTIVE),
    "semantic+rerank": Variant("semantic+rerank", pb.STRATEGY_SEMANTIC, rerank=True),
    "keyword+rerank": Variant("keyword+rerank", pb.STRATEGY_KEYWORD, rerank=True),
    "hybrid-rrf+rerank": Variant("hybrid-rrf+rerank", pb.STRATEGY_HYBRID, pb.FUSION_RRF, rerank=True),
}
WITHOUT_RERANK = ["semantic", "keyword", "hybrid-rrf", "hybrid-weighted", "adaptive"]
WITH_RERANK = ["keyword+rerank", "hybrid-rrf+rerank"]


@dataclass(slots=True)
class VariantResult:
    name: str
    measures: dict[str, float]
    queries: int
    errors: int
    latency_ms: dict[str, float]
    server_stage_ms: dict[str, float]
    mean_iterations: float
    decomposition_rate: float
    error_examples: list[str] = field(default_factory=list)
    #: answers ranked without what the row measures (:func:`spoiled`), counted as errors are
    degraded: int = 0
    degraded_examples: list[str] = field(default_factory=list)
    #: query id -> document id -> score (higher first); not part of the JSON summary
    run: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)

    def summary(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "run"}

    def trec_run(self) -> str:
        """The rankings in TREC run format (for trec_eval, ir-measures, significance tests)."""
        lines = []
        for qid, docs in self.run.items():
            for rank, (doc, score) in enumerate(sorted(docs.items(), key=lambda kv: -kv[1]), start=1):
                lines.append(f"{qid} Q0 {doc} {rank} {score:g} {self.name}")
        return "\n".join(lines) + "\n"


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def spoiled(variant: Variant, degraded: Iterable[str]) -> list[str]:
    """The reasons among ``degraded`` that make an answer not the row's ranking: the dense leg
    lost (its embedding or its store, or skipped for the deadline), any leg's store error, and on
    a rerank row the reranker failed, cut, absent or skipped for the deadline (the fused order
    scored as the reranked one)."""
    return [
        d for d in degraded
        if d.startswith("dense:") or d.endswith(":store_error") or (d.startswith("deadline:") and "dense" in d)
        or (variant.rerank and (d.startswith("rerank:") or (d.startswith("deadline:") and "rerank" in d)))
    ]


def ranking(resp: pb.QueryResponse, query_id: str, top_k: int, drop_self: bool) -> list[str]:
    """Documents in the order of their best parent chunk; the query's own id dropped when asked (ArguAna)."""
    out: list[str] = []
    for ctx in resp.contexts:
        doc = ctx.document_id
        if doc in out or (drop_self and doc == query_id):
            continue
        out.append(doc)
        if len(out) == top_k:
            break
    return out


async def run_variant(
    target: str,
    variant: Variant,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    *,
    top_k: int,
    contexts: int,
    concurrency: int,
    drop_self: bool,
    progress: bool,
    timeout_s: float = 120.0,
    transport: Transport = PLAINTEXT,
) -> VariantResult:
    run: dict[str, dict[str, float]] = {}
    latencies: list[float] = []
    stage_ms: dict[str, list[float]] = defaultdict(list)
    iterations: list[int] = []
    decomposed = 0
    errors: list[str] = []
    degraded: list[str] = []
    items = list(queries.items())
    async with transport.channel(target) as channel:
        stub = rpc.RetrievalServiceStub(channel)
        bar = tqdm(total=len(items), desc=variant.name, unit="q", disable=not progress)

        async def worker(offset: int) -> None:
            nonlocal decomposed
            for qid, text in items[offset::concurrency]:
                req = pb.QueryRequest(
                    query=text, top_k=contexts, strategy=variant.strategy, fusion=variant.fusion, use_cache=False, rerank=variant.rerank
                )
                t0 = time.perf_counter()
                try:
                    resp = await stub.Query(req, timeout=timeout_s)
                except grpc.aio.AioRpcError as exc:
                    errors.append(f"{qid}: {exc.code().name} {exc.details()}")
                    run[qid] = {}
                else:
                    latencies.append((time.perf_counter() - t0) * 1e3)
                    docs = ranking(resp, qid, top_k, drop_self)
                    run[qid] = {d: float(top_k - i) for i, d in enumerate(docs)}
                    per_stage: dict[str, float] = defaultdict(float)
                    for st in resp.metrics.stages:
                        per_stage[st.stage] += st.duration_ms
                    for stage, ms in per_stage.items():
                        stage_ms[stage].append(ms)
                    iterations.append(resp.metrics.iterations)
                    if why := spoiled(variant, resp.metrics.degraded):
                        degraded.append(f"{qid}: {', '.join(why)}")
                    decomposed += resp.metrics.decomposition_used
                bar.update(1)

        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        bar.close()
    # A query with no results still counts (as zero): pytrec_eval skips queries absent from the run.
    scored_run = {qid: (docs or {"__no_result__": 0.0}) for qid, docs in run.items()}
    agg = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, scored_run)
    return VariantResult(
        name=variant.name,
        measures={name: round(float(agg[m]), 4) for name, m in MEASURES.items()},
        queries=len(items),
        errors=len(errors),
        latency_ms={"p50": round(_percentile(latencies, 50), 1), "p95": round(_percentile(latencies, 95), 1)},
        server_stage_ms={k: round(sum(v) / len(items), 2) for k, v in stage_ms.items()},  # mean per query
        mean_iterations=round(statistics.fmean(iterations), 2) if iterations else 0.0,
        decomposition_rate=round(decomposed / len(items), 3),
        error_examples=errors[:5],
        degraded=len(degraded),
        degraded_examples=degraded[:5],
        run=run,
    )
