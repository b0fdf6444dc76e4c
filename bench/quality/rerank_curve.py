"""The cross-encoder's quality/latency curve on a tuning split: candidates x pair length.

    python -m bench.quality.rerank_curve --dataset DIR --index-dir INDEX \\
        --reranker-model-dir cross-encoder-onnx/ --candidates 10,20,50,100 --pair-tokens 128,256,512

For each pair length (``RETRIEVAL_RERANK_MAX_TOKENS``) the index is opened in-process with the
cross-encoder, every query's HYBRID candidates are fused once with the service's own nodes, and
the service's rerank node scores the first ``c`` of them for each candidate count
(``RETRIEVAL_RERANK_CANDIDATES``), pair cache and time budget off. A row is nDCG@10 of the
documents in the order the service returns them, and the rerank stage's median and p95 time per
query. The recommendation is the fastest setting (by median) within ``--tolerance`` nDCG@10 of the
best one: what to set for a deployment on this machine. Test splits are refused: the choice
must not be made on the queries it is reported on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from bench.beir import BeirDataset
from bench.provenance import provenance
from bench.quality.tune import replay_inputs, replay_parser, run_steps, score
from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import Identity, QueryOptions, Role, Strategy
from retrieval_server.workflow import nodes
from retrieval_server.workflow.state import QueryState


@dataclasses.dataclass(frozen=True, slots=True)
class CurvePoint:
    pair_tokens: int
    candidates: int
    #: candidates scored per query on average: at most the fused pool (top_k x CHILD_CANDIDATES_PER_CONTEXT)
    mean_scored: float
    ndcg_at_10: float
    rerank_p50_ms: float
    rerank_p95_ms: float


def _ints(text: str) -> list[int]:
    values = [int(x) for x in text.split(",") if x]
    if not values or min(values) <= 0:
        raise ValueError(f"expected positive integers separated by commas, got {text!r}")
    return values


def recommend(points: list[CurvePoint], tolerance: float) -> CurvePoint:
    """The fastest point (by median rerank time) whose nDCG@10 is within ``tolerance`` of the best."""
    best = max(p.ndcg_at_10 for p in points)
    return min((p for p in points if p.ndcg_at_10 >= best - tolerance), key=lambda p: (p.rerank_p50_ms, p.candidates, p.pair_tokens))


async def _candidates(app: Application, text: str, top_k: int) -> QueryState:
    """The query's fused HYBRID candidates, as the service's nodes make them for a reranked query."""
    state = QueryState(options=QueryOptions(text, top_k, strategy=Strategy.HYBRID, use_cache=False, rerank=True,
                                            identity=Identity("curve", Role.SUPER_ADMIN)))
    await run_steps(state, app.pipeline.deps, (nodes.build_access_filter, nodes.analyze_query, nodes.retrieve, nodes.fuse))
    return state


async def measure(overrides: dict[str, object], dataset: BeirDataset, reranker_dir: Path, pair_tokens: list[int],
                  candidates: list[int], top_k: int, limit: int | None) -> list[CurvePoint]:
    queries = dict(list(dataset.queries().items())[:limit])
    qrels = {q: r for q, r in dataset.qrels().items() if q in queries}
    points: list[CurvePoint] = []
    for tokens in pair_tokens:
        app = Application(load_settings(**overrides, reranker_model_dir=reranker_dir.resolve(), rerank_max_tokens=tokens,
                                        rerank_pair_cache=0, rerank_budget_ms=0.0))
        await app.open()
        try:
            fused = {qid: await _candidates(app, text, top_k) for qid, text in queries.items()}
            for c in candidates:
                deps = dataclasses.replace(app.pipeline.deps, settings=dataclasses.replace(app.pipeline.deps.settings, rerank_candidates=c))
                run: dict[str, dict[str, float]] = {}
                times: list[float] = []
                for qid, state in fused.items():
                    start = time.perf_counter()
                    reranked = (await nodes.rerank(state, deps))["reranked"]
                    times.append((time.perf_counter() - start) * 1e3)
                    docs: dict[str, float] = {}
                    for rank, h in enumerate(reranked):
                        docs.setdefault(h.document_id, -float(rank))
                    run[qid] = docs
                scored = statistics.mean(min(c, len(st.fused)) for st in fused.values())
                point = CurvePoint(tokens, c, scored, score(qrels, run), float(np.percentile(times, 50)), float(np.percentile(times, 95)))
                points.append(point)
                print(json.dumps(dataclasses.asdict(point)), flush=True)
        finally:
            await app.close()
    return points


def main(argv: list[str] | None = None) -> int:
    p = replay_parser("python -m bench.quality.rerank_curve", __doc__)
    p.add_argument("--reranker-model-dir", type=Path, required=True, help="ONNX cross-encoder folder (model.onnx, tokenizer.json)")
    p.add_argument("--candidates", type=_ints, default=[10, 20, 50, 100], help="candidate counts (default 10,20,50,100)")
    p.add_argument("--pair-tokens", type=_ints, default=[128, 256, 512], help="pair lengths in tokens (default 128,256,512)")
    p.add_argument("--top-k", type=int, default=20, help="contexts per query; the fused pool is top_k x 8 children, the most a "
                   "candidate count can score (default 20: 160)")
    p.add_argument("--queries", type=int, help="only the first N queries of the split")
    p.add_argument("--tolerance", type=float, default=0.005, help="nDCG@10 a recommendation may give up for speed (default 0.005)")
    args = p.parse_args(argv)
    if not (args.reranker_model_dir / "model.onnx").is_file():
        print(f"{args.reranker_model_dir} has no model.onnx", file=sys.stderr)
        return 2
    if (inputs := replay_inputs(args)) is None:
        return 2
    dataset, overrides = inputs
    points = asyncio.run(measure(overrides, dataset, args.reranker_model_dir, args.pair_tokens, args.candidates, args.top_k, args.queries))
    chosen = recommend(points, args.tolerance)
    result = {**provenance(), "dataset": dataset.name, "split": dataset.split, "reranker": str(args.reranker_model_dir),
              "points": [dataclasses.asdict(pt) for pt in points], "recommended": dataclasses.asdict(chosen)}
    if args.output:
        args.output.write_text(json.dumps(result, indent=2))
    print(json.dumps(result["recommended"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
