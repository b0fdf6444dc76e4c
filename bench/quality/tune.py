"""Choose fusion and ADAPTIVE parameters on a tuning split, never on test qrels.

    python -m bench.quality.tune --dataset bench/results/datasets/pydoc-long --split tune \\
        --index-dir /work/quality-indexes/pydoc-long-index

Runs in-process against an index that ``bench.quality`` built (stop any server on it first: the
embedded engine allows one process per folder). Every leg is retrieved once per query with the
service's own code (query analysis, the dense, parent, keyword and metadata legs); the candidate
parameters are then replayed over those lists with the service's fusion, so a grid of hundreds
of settings costs one retrieval per query. A document ranks by its best fused chunk, as in
``bench.quality``. Prints the best settings and the grid (JSON with ``--output``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import pickle
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Literal

import ir_measures
from ir_measures import nDCG

from bench.beir import BeirDataset, open_dataset
from bench.provenance import provenance
from bench.quality import index as bench_index
from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import Fusion, Identity, QueryOptions, Role, Strategy, VectorHit
from retrieval_server.workflow import dense_fusion, document_evidence, keyword_leg, nodes, parent_leg, query_windows, rank_fusion
from retrieval_server.workflow.rank_fusion import FusionUnit
from retrieval_server.workflow.adaptive import AdaptivePolicy, QueryFeatures, leg_weights, query_features
from retrieval_server.workflow.state import QueryState, WorkflowDeps

MEASURE = nDCG @ 10
RRF_K = (10.0, 30.0, 60.0, 100.0)
SPREADS = (0.0, 0.1, 0.25, 0.5, 1.0)
GAINS = (-3.0, -2.0, -1.0, 0.0, 1.0, 2.0)


@dataclasses.dataclass(slots=True)
class Retrieved:
    features: QueryFeatures
    #: as retrieve leaves them for fuse (a long query's windows are legs of their own)
    legs: dict[str, list[VectorHit]]
    #: what the legs searched for (the rewritten query)
    text: str
    #: longer than a child chunk (the service fuses it per parent under FUSION_UNIT=auto)
    long_query: bool = False


async def run_steps(state: QueryState, deps: WorkflowDeps, steps: Sequence[Callable[..., Awaitable[dict[str, object]]]]) -> None:
    """The workflow's own nodes applied to ``state`` in order, as the pipeline applies them."""
    for step in steps:
        for k, v in (await step(state, deps)).items():
            setattr(state, k, v)


async def retrieve_all(app: Application, queries: dict[str, str], pool: int, keyword_variants: bool = True,
                       windows: bool = True) -> dict[str, Retrieved]:
    """Every leg of each query, as the service's fuse receives them, plus the parent and document
    legs when the settings leave them out, and the keyword leg's variants. ``windows=False``: no
    search for a long query's windows (a replay that fuses cosines needs the whole query's)."""
    deps = app.pipeline.deps
    if not windows:
        deps = dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, long_query_windows=False))
    out: dict[str, Retrieved] = {}
    admin = Identity("tuner", Role.SUPER_ADMIN)
    for qid, text in queries.items():
        state = QueryState(options=QueryOptions(text, pool // deps.settings.child_candidates_per_context, strategy=Strategy.HYBRID,
                                                use_cache=False, identity=admin))
        await run_steps(state, deps, (nodes.build_access_filter, nodes.analyze_query, nodes.retrieve))
        legs = dict(state.legs)
        children = {k: v for k, v in legs.items() if k not in ("parent:0", "document:0")}
        if "parent:0" not in legs and deps.vectors.features.parent_vectors and state.query_vector is not None:
            hits = await deps.vectors.search_parents(state.query_vector, state.pool, state.point_filter)
            legs["parent:0"] = parent_leg.as_children(hits, children)
        if "document:0" not in legs and deps.vectors.features.parent_vectors and state.query_vector is not None:
            first = dataclasses.replace(state.point_filter, first_parents=True)
            hits = await deps.vectors.search_parents(state.query_vector, state.pool, first)
            legs["document:0"] = parent_leg.as_children(hits, children)
        if keyword_variants:
            kw = deps.settings.keyword
            plain = dataclasses.replace(kw, titled=False)
            legs["keyword-plain:0"] = await keyword_leg.search(deps.vectors, deps.sparse, text, state.pool, state.point_filter, plain)
            prf = dataclasses.replace(kw, prf_docs=10)
            legs["keyword-prf:0"] = await keyword_leg.search(deps.vectors, deps.sparse, text, state.pool, state.point_filter, prf)
        # Whatever the settings, so that every fusion unit replays (the service looks only when it needs to).
        searched = state.analysis.rewritten or text
        long_query = bool(query_windows.cut(searched, deps))
        out[qid] = Retrieved(query_features(text, deps.sparse, deps.term_stats, deps.settings.adaptive), legs, searched, long_query)
    return out


#: what the replay keeps of the fused list: everything (bench.quality ranks documents by their best chunk)
FUSED_POOL = 10_000


async def _run(app: Application, retrieved: dict[str, Retrieved], *, rrf_k: float, parent: str, keyword: str,
               policy: AdaptivePolicy | None, unit: FusionUnit | None = None) -> dict[str, dict[str, float]]:
    """One setting replayed through the service's own fusion (``nodes.fuse``: its dense fusion,
    leg weights, a long query's windows and document evidence): ``parent`` is ``on`` or ``off``
    (the parent leg kept or left out), ``keyword`` which keyword leg stands as the service's,
    ``policy`` ADAPTIVE's weighing (None: HYBRID's), ``unit`` what the ranks are fused for
    (``RETRIEVAL_FUSION_UNIT``; None: the service's setting)."""
    settings = app.pipeline.deps.settings
    settings = dataclasses.replace(settings, rrf_k=rrf_k, fusion_unit=unit or settings.fusion_unit)
    deps = dataclasses.replace(app.pipeline.deps, settings=settings)
    run: dict[str, dict[str, float]] = {}
    for qid, r in retrieved.items():
        legs: dict[str, list[VectorHit]] = {}
        for leg, hits in r.legs.items():
            kind, _, n = leg.partition(":")
            if kind.startswith("keyword"):
                if kind == keyword:
                    legs[f"keyword:{n}"] = hits
            elif not ((kind == "parent" and parent == "off") or (kind == "document" and not settings.document_leg)):
                legs[leg] = hits
        state = QueryState(options=QueryOptions(r.text, 1, strategy=Strategy.HYBRID, fusion=Fusion.RRF), pool=FUSED_POOL,
                           legs=legs, long_query=r.long_query)
        if policy is not None:
            state.leg_weights = leg_weights(r.features, policy)
        fused = (await nodes.fuse(state, deps))["fused"]
        # By rank, as bench.quality scores the service's answers: equal RRF scores are ordered by
        # the fusion, not by the evaluator's tie rule (document id).
        docs: dict[str, float] = {}
        for rank, h in enumerate(fused):
            docs.setdefault(h.document_id, -float(rank))
        run[qid] = docs
    return run


#: dense granularities fused: their shares of the dense weight, from the query's word count
Shares = Callable[[int], dict[str, float]]


def granularity_grid() -> dict[str, Shares]:
    """Candidate ways to fuse the child, parent and document vectors (each a share of the dense weight)."""
    grid: dict[str, Shares] = {
        "child": lambda n: {"dense": 1.0},
        "document": lambda n: {"document": 1.0},
        "child+parent": lambda n: {"dense": 0.5, "parent": 0.5},
        "child+parent+document": lambda n: {"dense": 1 / 3, "parent": 1 / 3, "document": 1 / 3},
    }
    for f in (0.25, 0.5, 0.75):
        grid[f"child+document {f}"] = lambda n, f=f: {"dense": 1 - f, "document": f}
    # Longer queries lean on the coarser granularity: the document's share is n / (n + c) for a
    # query of n words, c words being where child and document count the same.
    for c in (25, 50, 100, 200):
        grid[f"child+document n/(n+{c})"] = lambda n, c=c: {"dense": c / (n + c), "document": n / (n + c)}
    return grid


def run_granularity(app: Application, retrieved: dict[str, Retrieved], shares: Shares, hybrid: bool,
                    spread: float = 0.0) -> dict[str, dict[str, float]]:
    """SEMANTIC (dense legs only) or HYBRID RRF with the dense weight split among granularities;
    ``spread``: document evidence (the service's ``document_evidence.rescore``) at this share."""
    deps = app.pipeline.deps
    s = deps.settings
    run: dict[str, dict[str, float]] = {}
    for qid, r in retrieved.items():
        share = shares(r.features.tokens)
        lists, weights = [], []
        for leg, hits in r.legs.items():
            kind = leg.split(":")[0]
            if not hits:
                continue
            if kind in parent_leg.DENSE_GRANULARITIES:
                if share.get(kind, 0.0) <= 0:
                    continue
                weight = share[kind]
            elif not hybrid or kind.startswith("keyword-"):
                continue
            elif kind == "metadata":
                weight = s.metadata_weight / max(s.semantic_weight, s.keyword_weight, 1e-9)
            else:
                weight = 1.0
            lists.append(hits)
            weights.append(weight)
        # One list keeps its own order, as the service returns it; several are fused, then rescored.
        fused = lists[0] if len(lists) == 1 else document_evidence.rescore(rank_fusion.fuse_lists(lists, weights, deps.settings, Fusion.RRF, 10_000), spread)
        docs: dict[str, float] = {}
        for rank, h in enumerate(fused):
            docs.setdefault(h.document_id, -float(rank))
        run[qid] = docs
    return run


#: how the dense granularities' cosines combine into a document's dense score: CombMAX, CombSUM, CombMNZ
Combine = Literal["max", "sum", "mnz"]


@dataclasses.dataclass(frozen=True, slots=True)
class CosineFusion:
    """Granularities fused by their raw cosines (one model, one query vector: one scale), each
    plus its offset; a granularity a document is missing from counts its leg's lowest returned
    cosine under CombSUM/CombMNZ (the document ranked below everything the leg returned)."""

    offsets: dict[str, float]
    combine: Combine = "max"


def cosine_grid() -> dict[str, CosineFusion]:
    """Candidate cosine fusions: CombMAX of child and document vectors (document offset on a grid),
    of child and parent vectors, and CombSUM/CombMNZ. Under CombMAX the parent vectors include
    the document vectors (a document's first window is its first parent's vector), so "child,
    parent" is also "child, parent, document"."""
    grid: dict[str, CosineFusion] = {}
    for off in (-0.1, -0.075, -0.05, -0.025, 0.0, 0.025, 0.05):
        grid[f"cos max child, document{off:+.3f}"] = CosineFusion({"dense": 0.0, "document": off})
    for off in (-0.05, 0.0, 0.05):
        grid[f"cos max child, parent{off:+.3f}"] = CosineFusion({"dense": 0.0, "parent": off})
    for combine in ("sum", "mnz"):
        grid[f"cos {combine} child, document"] = CosineFusion({"dense": 0.0, "document": 0.0}, combine)
        grid[f"cos {combine} child, parent, document"] = CosineFusion({"dense": 0.0, "parent": 0.0, "document": 0.0}, combine)
    return grid


def cosine_fused(legs: dict[str, list[VectorHit]], fusion: CosineFusion) -> list[VectorHit]:
    """The dense legs fused by cosine into one list of chunks, best first. CombMAX at the chunk
    level (each chunk's best offset cosine over the legs that returned it) ranks documents exactly
    as the document-level CombMAX does; CombSUM/CombMNZ sum per document (each granularity's best
    cosine for it), reported on the document's best chunk."""
    chosen = {leg: [h.scored(h.score + fusion.offsets[leg.split(":")[0]]) for h in hits]
              for leg, hits in legs.items() if hits and leg.split(":")[0] in fusion.offsets}
    if fusion.combine == "max":
        return dense_fusion.max_cosine(list(chosen.values()))
    per_doc: dict[str, dict[str, float]] = {}
    top_chunk: dict[str, VectorHit] = {}
    floors: dict[str, float] = {}
    for leg, hits in chosen.items():
        floors[leg] = min(h.score for h in hits)
        for h in hits:
            doc = per_doc.setdefault(h.document_id, {})
            doc[leg] = max(doc.get(leg, float("-inf")), h.score)
            if h.document_id not in top_chunk or h.score > top_chunk[h.document_id].score:
                top_chunk[h.document_id] = h
    out = []
    for doc_id, found in per_doc.items():
        total = sum(found.get(leg, floor) for leg, floor in floors.items())
        out.append(top_chunk[doc_id].scored(total * (len(found) if fusion.combine == "mnz" else 1)))
    return sorted(out, key=lambda h: -h.score)


def run_cosine(app: Application, retrieved: dict[str, Retrieved], fusion: CosineFusion, hybrid: bool) -> dict[str, dict[str, float]]:
    """SEMANTIC: the cosine-fused dense list; HYBRID RRF: that list as the one dense leg, fused
    with the keyword and metadata legs as the service does."""
    folded = {
        qid: dataclasses.replace(r, legs={"dense:0": cosine_fused(r.legs, fusion),
                                          **{k: v for k, v in r.legs.items() if k.split(":")[0] not in parent_leg.DENSE_GRANULARITIES}})
        for qid, r in retrieved.items()
    }
    return run_granularity(app, folded, lambda n: {"dense": 1.0}, hybrid)


def _by_kind(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], kinds: dict[str, set[str]]) -> dict[str, float]:
    """nDCG@10 per kind of query (when the split mixes kinds)."""
    if len(kinds) < 2:
        return {}
    return {f"ndcg@10 {k}:": score({q: qrels[q] for q in ids if q in qrels}, {q: run[q] for q in ids}) for k, ids in kinds.items()}


def score(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> float:
    return float(ir_measures.calc_aggregate([MEASURE], qrels, run)[MEASURE])


async def tune(app: Application, dataset: BeirDataset, pool: int, cache: Path | None = None, granularity: bool = False) -> dict[str, object]:
    queries, qrels = dataset.queries(), dataset.qrels()
    if cache is not None and cache.is_file():
        retrieved = pickle.loads(cache.read_bytes())
    else:
        retrieved = await retrieve_all(app, queries, pool, keyword_variants=not granularity, windows=not granularity)
        if cache is not None:
            cache.write_bytes(pickle.dumps(retrieved))
    # Also per kind of query (the id's prefix: q: long queries, t: titles, s: sentences).
    kinds: dict[str, set[str]] = {}
    for qid in retrieved:
        kinds.setdefault(qid.split(":")[0], set()).add(qid)
    if granularity:
        rows: list[dict[str, object]] = []
        for name, shares in granularity_grid().items():
            for strategy, spread in itertools.product(("semantic", "hybrid"), SPREADS):
                run = run_granularity(app, retrieved, shares, strategy == "hybrid", spread)
                rows.append({"granularity": name, "strategy": strategy, "spread": spread, "ndcg@10": score(qrels, run), **_by_kind(qrels, run, kinds)})
        # Fused by cosine instead of by rank (the service's DENSE_FUSION=max_cosine and its variants).
        for name, fusion in cosine_grid().items():
            for strategy in ("semantic", "hybrid"):
                run = run_cosine(app, retrieved, fusion, strategy == "hybrid")
                rows.append({"granularity": name, "strategy": strategy, "spread": 0.0, "ndcg@10": score(qrels, run), **_by_kind(qrels, run, kinds)})
        return {"dataset": dataset.name, "split": dataset.split, "queries": len(queries),
                "mean_words": sum(r.features.tokens for r in retrieved.values()) / max(len(retrieved), 1), "granularity": rows}
    grid = []
    for rrf_k, parent, keyword in itertools.product(RRF_K, ("on", "off"), ("keyword", "keyword-plain", "keyword-prf")):
        grid.append({"rrf_k": rrf_k, "parent": parent, "keyword": keyword,
                     "ndcg@10": score(qrels, await _run(app, retrieved, rrf_k=rrf_k, parent=parent, keyword=keyword, policy=None))})
    fixed = max(grid, key=lambda g: g["ndcg@10"])
    # ADAPTIVE's gains are tuned on top of the service's configured legs, as it will run.
    s = app.pipeline.deps.settings
    base = {"rrf_k": s.rrf_k, "parent": "on" if s.parent_leg else "off", "keyword": "keyword" if s.keyword.titled else "keyword-plain"}
    adaptive = []
    for rare, ident, quoted in itertools.product(GAINS, GAINS, (0.0, 1.0, 2.0)):
        policy = AdaptivePolicy(rare_gain=rare, identifier_gain=ident, quoted_gain=quoted)
        run = await _run(app, retrieved, rrf_k=float(base["rrf_k"]), parent=str(base["parent"]), keyword=str(base["keyword"]), policy=policy)
        adaptive.append({"rare_gain": rare, "identifier_gain": ident, "quoted_gain": quoted, "ndcg@10": score(qrels, run)})
    units = []
    for unit in ("chunk", "parent", "auto"):
        run = await _run(app, retrieved, rrf_k=float(base["rrf_k"]), parent=str(base["parent"]), keyword=str(base["keyword"]), policy=None, unit=unit)
        units.append({"fusion_unit": unit, "ndcg@10": score(qrels, run), **_by_kind(qrels, run, kinds)})
    return {"dataset": dataset.name, "split": dataset.split, "queries": len(queries), "best_fixed": fixed, "adaptive_base": base,
            "best_adaptive": max(adaptive, key=lambda g: g["ndcg@10"]), "fusion_units": units, "grid": grid, "adaptive": adaptive}


def replay_parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """The arguments every replay over a tuning split takes: dataset, split, index, model, output."""
    p = argparse.ArgumentParser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--split", default="tune", help="qrels/<split>.tsv: a tuning split (never test)")
    p.add_argument("--index-dir", type=Path, required=True, help="an index built by bench.quality for this corpus")
    p.add_argument("--model-dir", type=Path, default=None, help="the index's model (default: as bench.quality)")
    p.add_argument("--bundled-model", action="store_true", help="the service's bundled int8 model")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a service setting, e.g. RETRIEVAL_LONG_QUERY_WINDOWS=false")
    p.add_argument("--output", type=Path)
    return p


def replay_inputs(args: argparse.Namespace) -> tuple[BeirDataset, dict[str, object]] | None:
    """The tuning split and the settings that open its index read-only; None (and why, on stderr)
    for a test split or a split whose files are missing."""
    if args.split == "test":
        print("tuning on the test split is what this tool exists to avoid", file=sys.stderr)
        return None
    hint = " (a tuning split is made by python -m bench.quality.titles or python -m bench.quality.longset: pass its folder as --dataset)"
    if (dataset := open_dataset(args.dataset, args.split, hint)) is None:
        return None
    model_dir = None if args.bundled_model else (args.model_dir or bench_index.default_model_dir())
    overrides: dict[str, object] = {"data_dir": args.index_dir.resolve(), "cache_backend": "none", "redis_url": None,
                                    "metrics_enabled": False, "read_only": True, "log_level": "WARNING"}
    if model_dir is not None:
        overrides["model_dir"] = model_dir.resolve()
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name.removeprefix("RETRIEVAL_").lower()] = value
    return dataset, overrides


def main(argv: list[str] | None = None) -> int:
    p = replay_parser("python -m bench.quality.tune", __doc__)
    p.add_argument("--pool", type=int, default=800, help="child hits per leg (bench.quality: top_k 200 contexts x 8 = 1600)")
    p.add_argument("--cache", type=Path, help="keep the retrieved legs here (pickle) and replay from them on the next run")
    p.add_argument("--granularity", action="store_true", help="only the grid of dense granularities (child, parent, document vectors; "
                   "SEMANTIC and HYBRID RRF), without the keyword variants and a long query's windows (the replays fuse the whole query's cosines)")
    args = p.parse_args(argv)
    if (inputs := replay_inputs(args)) is None:
        return 2
    dataset, overrides = inputs

    async def go() -> dict[str, object]:
        app = Application(load_settings(**overrides))
        await app.open()
        if not app.vectors.features.parent_vectors:
            print("the index holds no parent vectors: the parent settings replay as 'off' (build it with --parent-leg on)", file=sys.stderr)
        try:
            return await tune(app, dataset, args.pool, args.cache, args.granularity)
        finally:
            await app.close()

    result = {**provenance(), **asyncio.run(go())}
    if args.output:
        args.output.write_text(json.dumps(result, indent=2))
    if args.granularity:
        print(json.dumps(result, indent=2))
    else:
        print(json.dumps({k: result[k] for k in ("dataset", "split", "queries", "best_fixed", "best_adaptive", "fusion_units")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
