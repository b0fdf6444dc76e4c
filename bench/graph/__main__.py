"""Recall of multi-hop questions with and without the graph leg, on synthetic engineering wikis.

    python -m bench.graph                 # seeds 1-5, recall@5 and @10, a Markdown table
    python -m bench.graph --seeds 3 --output bench/results/graph.json

Each seed makes a wiki (bench/graph/corpus.py: data stores, services, projects, maintainers),
ingests it into a fresh in-process service (embedded stores, no LLM, no cross-encoder) and asks
its two-hop questions with each strategy. HYBRID runs twice: as configured (graph leg on) and
with RETRIEVAL_GRAPH_EXPANSION=false. A question's recall@k is the share of its answering
documents among the top-k contexts' documents.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import tempfile
from collections import defaultdict
from pathlib import Path

from bench.graph.corpus import make_wiki
from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource, QueryOptions, Strategy
from retrieval_server.workflow.pipeline import QueryPipeline

VARIANTS = [
    ("SEMANTIC", Strategy.SEMANTIC, True),
    ("KEYWORD", Strategy.KEYWORD, True),
    ("HYBRID without the graph leg", Strategy.HYBRID, False),
    ("HYBRID (graph leg on)", Strategy.HYBRID, True),
    ("GRAPH (the graph leg alone)", Strategy.GRAPH, True),
]


async def evaluate_seed(seed: int, ks: tuple[int, ...], model_dir: Path | None = None) -> dict[str, dict[str, list[float]]]:
    """variant -> "<kind>@k" -> per-question recalls."""
    wiki = make_wiki(seed)
    with tempfile.TemporaryDirectory() as data:
        # The bundled int8 model unless a folder is given: the same model on every machine, where
        # "auto" would time int8 against fp32 and could choose differently from run to run.
        app = Application(load_settings(data_dir=Path(data), cache_backend="none", redis_url=None, model_dir=model_dir, model="int8", metrics_enabled=False))
        await app.open()
        try:
            report = await app.ingest([DocumentSource(f"{d}.txt", text.encode(), document_id=d) for d, text in wiki.documents.items()])
            if report.errors:
                raise RuntimeError(f"ingest failed: {report.errors}")
            deps = app.pipeline.deps
            without = QueryPipeline(dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, graph_expansion=False)))
            out: dict[str, dict[str, list[float]]] = {}
            for name, strategy, graph_on in VARIANTS:
                pipeline = app.pipeline if graph_on else without
                per: dict[str, list[float]] = defaultdict(list)
                for q in wiki.questions():
                    result = await pipeline.query(QueryOptions(q.text, max(ks), strategy=strategy, use_cache=False))
                    docs = [c.document.document_id for c in result.contexts]
                    for k in ks:
                        recall = len(set(docs[:k]) & q.relevant) / len(q.relevant)
                        per[f"{q.kind}@{k}"].append(recall)
                        per[f"all@{k}"].append(recall)
                out[name] = dict(per)
            return out
        finally:
            await app.close()


def table(results: dict[str, dict[str, list[float]]], ks: tuple[int, ...], questions: int) -> str:
    kinds = sorted({key.split("@")[0] for per in results.values() for key in per} - {"all"})
    columns = [f"all@{k}" for k in ks] + [f"{kind}@{ks[0]}" for kind in kinds]
    header = ["variant", *(f"recall@{c.split('@')[1]}" if c.startswith("all") else f"{c.split('@')[0]} R@{c.split('@')[1]}" for c in columns)]
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * len(columns)]
    for name, per in results.items():
        lines.append(f"| {name} | " + " | ".join(f"{sum(per[c]) / len(per[c]):.3f}" for c in columns) + " |")
    return "\n".join(lines) + f"\n\n{questions} questions."


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.graph", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=5, help="wikis to generate (seeds 1..N)")
    p.add_argument("--k", type=int, action="append", help="recall cut-offs (default 5 and 10)")
    p.add_argument("--model-dir", type=Path, help="embedding model folder (default: the bundled int8 MiniLM)")
    p.add_argument("--output", type=Path, help="also write the per-question recalls as JSON")
    args = p.parse_args(argv)
    ks = tuple(args.k or (5, 10))
    merged: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for seed in range(1, args.seeds + 1):
        for name, per in asyncio.run(evaluate_seed(seed, ks, args.model_dir)).items():
            for key, values in per.items():
                merged[name][key].extend(values)
    questions = len(next(iter(merged.values()))[f"all@{ks[0]}"])
    print(table({n: dict(v) for n, v in merged.items()}, ks, questions))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(merged, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
