"""Evaluate the service on a BEIR dataset, end to end through the gRPC API.

    python -m bench.quality --dataset ../shared/datasets/scifact
    python -m bench.quality --dataset ../shared/datasets/nfcorpus --strategies semantic,hybrid-rrf

The corpus goes in through IngestDocuments into a fresh data directory (reused on the next run
while the corpus, the model and the chunking are unchanged); every test query goes through
Query; nDCG@10, Recall@100 and MRR@10 come from ir-measures (pytrec_eval).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
from dataclasses import asdict
from pathlib import Path

from bench.beir import open_dataset
from bench.provenance import provenance
from bench.quality import index as bench_index
from bench.quality.evaluate import VARIANTS, WITH_RERANK, WITHOUT_RERANK, VariantResult, run_variant
from bench.quality.protocol import MTEB_CONTENT_TOKENS, MTEB_SETTINGS
from bench.server_process import parse_set, running_server
from bench.transport import Transport


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, required=True, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    p.add_argument("--split", default="test")
    p.add_argument("--strategies", help=f"comma-separated, from: {', '.join(VARIANTS)} (default: all without rerank, plus "
                   "the rerank rows when --reranker-model-dir or --tei-url is given)")
    p.add_argument("--top-k", type=int, default=100, help="documents per query scored (default 100, for Recall@100)")
    p.add_argument("--concurrency", type=int, default=4, help="queries in flight")
    p.add_argument("--model-dir", type=Path, default=None, help="embedding model folder (default: ../shared/models/all-MiniLM-L6-v2 "
                   "when present, else the service's bundled int8 model)")
    p.add_argument("--bundled-model", action="store_true", help="use the service's bundled int8 model even when ../shared has fp32")
    p.add_argument("--reranker-model-dir", type=Path, help="ONNX cross-encoder folder (adds the rerank rows)")
    p.add_argument("--tei-url", help="TEI server for /rerank (adds the rerank rows)")
    p.add_argument("--rerank-candidates", type=int, default=100, help="child chunks sent to the cross-encoder")
    p.add_argument("--mteb-protocol", action="store_true", help="documents truncated to 256 tokens, one chunk each, as MTEB "
                   "embeds them: checks the service's numbers against MTEB's (separate index)")
    p.add_argument("--drop-self", action="store_true", help="drop a retrieved document whose id equals the query id (ArguAna)")
    p.add_argument("--index-dir", type=Path, help="data directory of the index (default: bench/results/quality-index/<dataset>)")
    p.add_argument("--ingest-batch", type=int, default=200, help="documents per IngestDocuments request")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="extra server setting, e.g. RETRIEVAL_RRF_K=30")
    techniques = p.add_argument_group("techniques (query time: the same index serves every combination)")
    techniques.add_argument("--parent-leg", choices=["on", "off"], help="search the parents' own vectors (RETRIEVAL_PARENT_LEG)")
    techniques.add_argument("--title-field", choices=["on", "off"], help="keyword leg with the title as a BM25F field "
                            "(RETRIEVAL_KEYWORD_TITLE_FIELD)")
    techniques.add_argument("--prf", type=int, metavar="DOCS", help="RM3 feedback from this many keyword hits, 0: off (RETRIEVAL_PRF_DOCS)")
    techniques.add_argument("--label", default="", help="suffix for the rows and the output file, e.g. -no-parent")
    p.add_argument("--runs-dir", type=Path, help="also write each strategy's rankings as a TREC run file here")
    p.add_argument("--output", type=Path, help="JSON results (default: bench/results/quality-<dataset>.json)")
    p.add_argument("--no-progress", action="store_true")
    Transport.add_arguments(p)
    return p


def _table(dataset: str, rows: list[VariantResult]) -> str:
    lines = [
        f"| {dataset} | nDCG@10 | Recall@100 | MRR@10 | p50 ms | p95 ms | errors | degraded |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        m = r.measures
        lines.append(
            f"| {r.name} | {m['ndcg@10']:.3f} | {m['recall@100']:.3f} | {m['mrr@10']:.3f} | "
            f"{r.latency_ms['p50']:.0f} | {r.latency_ms['p95']:.0f} | {r.errors} | {r.degraded} |"
        )
    return "\n".join(lines)


def technique_settings(args: argparse.Namespace) -> dict[str, str]:
    """The technique switches as server settings."""
    out = {}
    if args.parent_leg:
        out["RETRIEVAL_PARENT_LEG"] = str(args.parent_leg == "on").lower()
    if args.title_field:
        out["RETRIEVAL_KEYWORD_TITLE_FIELD"] = str(args.title_field == "on").lower()
    if args.prf is not None:
        out["RETRIEVAL_PRF_DOCS"] = str(args.prf)
    return out


def server_settings(shaping: dict[str, str], index_dir: Path, contexts: int, rerank_candidates: int,
                    extra: dict[str, str]) -> dict[str, str]:
    """The quality server's settings: the index's, then the bench's own, then ``extra`` (the
    technique switches and ``--set``), which win."""
    activation = {**os.environ, **shaping, **extra}.get("RETRIEVAL_RERANK_ACTIVATION", "sigmoid")
    return {
        **shaping,
        "RETRIEVAL_DATA_DIR": str(index_dir),
        "RETRIEVAL_CACHE_BACKEND": "none",
        "RETRIEVAL_TOP_K_MAX": str(max(contexts, 1)),
        "RETRIEVAL_RERANK_CANDIDATES": str(rerank_candidates),
        # Ranking is measured: the answer-size threshold would cut Recall@100, not change the order.
        # The lowest threshold the settings take keeps every candidate (a probability is at least 0).
        "RETRIEVAL_RERANK_THRESHOLD": "0" if activation == "sigmoid" else "-1000",
        # The rerank rows share a server and rerank many of the same (query, text) pairs: remembered
        # scores would time the second row's rerank stage as a dictionary lookup.
        "RETRIEVAL_RERANK_PAIR_CACHE": "0",
        **extra,
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    transport = Transport.from_args(args)
    if (dataset := open_dataset(args.dataset, args.split)) is None:
        return 2
    model_dir = None if args.bundled_model else (args.model_dir or bench_index.default_model_dir())
    reranking = bool(args.reranker_model_dir or args.tei_url)
    names = args.strategies.split(",") if args.strategies else WITHOUT_RERANK + (WITH_RERANK if reranking else [])
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        print(f"unknown strategies {unknown}; choose from {list(VARIANTS)}", file=sys.stderr)
        return 2
    if any(VARIANTS[n].rerank for n in names) and not reranking:
        print("rerank rows need --reranker-model-dir or --tei-url", file=sys.stderr)
        return 2

    try:
        extra = {**technique_settings(args), **parse_set(args.set)}
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    contexts = 2 * args.top_k  # parent chunks asked for; several may come from one document
    if args.mteb_protocol:
        extra = {**MTEB_SETTINGS, **extra}
    shaping = bench_index.index_settings(dict(os.environ), extra)
    suffix, baseline = ("-mteb", bench_index.index_settings({}, MTEB_SETTINGS)) if args.mteb_protocol else ("", bench_index.INDEX_DEFAULTS)
    index_dir = (args.index_dir or bench_index.default_index_dir(dataset, suffix, shaping, baseline)).resolve()
    settings = server_settings(shaping, index_dir, contexts, args.rerank_candidates, extra)
    if model_dir is not None:
        settings["RETRIEVAL_MODEL_DIR"] = str(model_dir.resolve())
    if args.reranker_model_dir:
        settings["RETRIEVAL_RERANKER_MODEL_DIR"] = str(args.reranker_model_dir.resolve())
    if args.tei_url:
        settings["RETRIEVAL_TEI_URL"] = args.tei_url

    progress = not args.no_progress
    log = index_dir.parent / f"{index_dir.name}-server.log"
    report = bench_index.ensure(dataset, index_dir, settings, model_dir, batch=args.ingest_batch, progress=progress, log=log,
                                truncate_tokens=MTEB_CONTENT_TOKENS if args.mteb_protocol else 0, transport=transport)
    queries, qrels = dataset.queries(), dataset.qrels()
    with running_server(settings, log, transport=transport) as server:
        rows = [
            asyncio.run(
                run_variant(server.target, VARIANTS[n], queries, qrels, top_k=args.top_k, contexts=contexts,
                            concurrency=args.concurrency, drop_self=args.drop_self, progress=progress, transport=transport)
            )
            for n in names
        ]
    for r in rows:
        r.name += args.label
    out = {
        **provenance(),
        "dataset": dataset.name,
        "split": args.split,
        "queries": len(queries),
        "model": str(model_dir) if model_dir else "bundled int8 all-MiniLM-L6-v2",
        "reranker": str(args.reranker_model_dir or args.tei_url or ""),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "transport": transport.name,
        "protocol": "mteb (documents truncated to 256 tokens, one chunk each)" if args.mteb_protocol else "service default chunking",
        "settings": extra,
        "options": {"top_k": args.top_k, "contexts_requested": contexts, "concurrency": args.concurrency, "drop_self": args.drop_self},
        "index": {**asdict(report), "terms": bench_index.terms_revision(index_dir)},
        "results": [r.summary() for r in rows],
    }
    output = args.output or bench_index.RESULTS / f"quality-{dataset.name}{'-mteb' if args.mteb_protocol else ''}{args.label}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(out, indent=2))
    if args.runs_dir:
        args.runs_dir.mkdir(parents=True, exist_ok=True)
        for r in rows:
            (args.runs_dir / f"{dataset.name}-{r.name}.run").write_text(r.trec_run())
    idx = "reused" if report.reused else f"ingested in {report.seconds:.0f} s"
    print(f"\n{dataset.name}: {len(queries)} queries, {report.documents} documents ({idx}), "
          f"{report.child_chunks} child chunks, {len(report.errors)} ingest errors; model: {out['model']}")
    print(_table(dataset.name, rows))
    print(f"written: {output}")
    # Scores of an index that lacks documents are not the dataset's, nor a row's whose answers lost a leg or the reranker.
    return 1 if report.errors or any(r.errors or r.degraded for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
