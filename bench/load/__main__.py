"""Load benchmark over a SciFact index, through a grpc.aio load generator.

    python -m bench.load                      # all scenarios, concurrency 1/8/32, 1 and 2 server processes
    python -m bench.load --scenarios search,query-hybrid --concurrency 8 --processes 1 --duration 10
    python -m bench.load --open-loop-rates 20,40  # adds open-loop runs at those request rates

The server is started for each process count with the index of bench.quality (built first when
missing). The rerank scenario uses --reranker-model-dir, or a cross-encoder with the shape of
ms-marco-MiniLM-L-6-v2 and random weights built here (same cost, meaningless scores; said so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
from pathlib import Path

from bench.beir import open_dataset, shared_dir
from bench.load import generator
from bench.load.reranker import reranker_dir
from bench.load.resources import ResourceSampler
from bench.load.scenarios import RERANK_CANDIDATES, SCENARIOS
from bench.load.settings import available_cores, server_settings
from bench.provenance import provenance
from bench.quality import index as bench_index
from bench.server_process import running_server
from bench.transport import PLAINTEXT, Transport


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=shared_dir() / "datasets" / "scifact", help="BEIR folder (index and query texts)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated, from: {', '.join(SCENARIOS)}")
    p.add_argument("--concurrency", type=_ints, default=[1, 8, 32], help="closed-loop concurrency levels (default 1,8,32)")
    p.add_argument("--open-loop-rates", type=_ints, default=[], help="open-loop runs at these request rates per second")
    p.add_argument("--open-loop-load", type=_floats, default=[0.5, 0.9],
                   help="open-loop runs at these fractions of the scenario's best closed-loop req/s (default 0.5,0.9; '' for none)")
    p.add_argument("--processes", type=_ints, default=[1, 2], help="server process counts to compare (default 1,2)")
    p.add_argument("--duration", type=float, default=15.0, help="measured seconds per run (after a 2 s warm-up)")
    p.add_argument("--model-dir", type=Path, help="embedding model (default: as bench.quality)")
    p.add_argument("--bundled-model", action="store_true", help="the service's bundled int8 embedding model")
    p.add_argument("--reranker-model-dir", type=Path, help="real cross-encoder folder (default: one built here, random weights)")
    p.add_argument("--index-dir", type=Path, help="index data directory (default: bench.quality's for the dataset)")
    p.add_argument("--output", type=Path, default=bench_index.RESULTS / "load.json")
    Transport.add_arguments(p)
    return p


def _dominant(stage_ms: dict[str, float]) -> str:
    if not stage_ms:
        return ""
    stage, ms = next(iter(stage_ms.items()))
    total = sum(stage_ms.values())
    return f"{stage} {ms:.1f} ms ({ms / total:.0%})"


def _table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| scenario | processes | load | req/s | p50 ms | p95 ms | p99 ms | errors | server CPU (cores) | server RSS MB | dominant stage |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        load = f"c={r['concurrency']}" if r["mode"] == "closed" else f"{r['rate']}/s open"
        lines.append(
            f"| {r['scenario']} | {r['processes']} | {load} | {r['rps']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
            f"{r['p99_ms']:.1f} | {r['errors']} | {r['cpu_cores']:.2f} | {r['peak_rss_mb']:.0f} | {r['dominant']} |"
        )
    return "\n".join(lines)


async def _run_cell(target: str, pid: int, scenario_name: str, queries: list[str], *, concurrency: int = 0, rate: float = 0.0,
                    duration_s: float, transport: Transport = PLAINTEXT) -> dict[str, object]:
    scenario = SCENARIOS[scenario_name]
    with ResourceSampler(pid) as sampler:
        if rate:
            samples = await generator.open_loop(target, scenario, queries, rate=rate, duration_s=duration_s, channels=8, transport=transport)
        else:
            samples = await generator.closed_loop(target, scenario, queries, concurrency=concurrency, duration_s=duration_s,
                                                  channels=concurrency, transport=transport)
    summary = samples.summary()
    return {
        "scenario": scenario_name,
        "mode": "open" if rate else "closed",
        "concurrency": concurrency,
        "rate": rate,
        **summary,
        "cpu_cores": sampler.usage.cpu_cores,
        "peak_rss_mb": sampler.usage.peak_rss_mb,
        "dominant": _dominant(summary["stage_ms"]),  # type: ignore[arg-type]
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    transport = Transport.from_args(args)
    if (dataset := open_dataset(args.dataset, hint=" (set --dataset, or RETRIEVAL_SHARED_DIR)")) is None:
        return 2
    names = args.scenarios.split(",")
    if unknown := [n for n in names if n not in SCENARIOS]:
        print(f"unknown scenarios {unknown}; choose from {list(SCENARIOS)}", file=sys.stderr)
        return 2
    model_dir = None if args.bundled_model else (args.model_dir or bench_index.default_model_dir())
    index_dir = (args.index_dir or bench_index.default_index_dir(dataset)).resolve()
    base = {"RETRIEVAL_MODEL_DIR": str(model_dir.resolve())} if model_dir else {}
    log_dir = bench_index.RESULTS / "load-logs"
    report = bench_index.ensure(dataset, index_dir, base, model_dir, batch=200, progress=True, log=log_dir / "ingest.log")
    reranker, reranker_note = reranker_dir(args.reranker_model_dir)
    queries = list(dataset.queries().values())
    cores = available_cores()
    rows: list[dict[str, object]] = []
    served: dict[int, dict[str, str]] = {}
    for processes in args.processes:
        settings = served[processes] = server_settings(base, index_dir, processes, reranker, RERANK_CANDIDATES)
        with running_server(settings, log_dir / f"server-{processes}p.log", transport=transport) as server:
            for name in names:
                if SCENARIOS[name].warm_cache:
                    asyncio.run(generator.warm(server.target, SCENARIOS[name], queries, connections=1 if processes == 1 else 8, transport=transport))
                for c in args.concurrency:
                    row = asyncio.run(_run_cell(server.target, server.pid, name, queries, concurrency=c, duration_s=args.duration, transport=transport))
                    rows.append({"processes": processes, **row})
                    print(_table([rows[-1]]).splitlines()[-1], flush=True)
                best = max((float(r["rps"]) for r in rows if r["scenario"] == name and r["processes"] == processes), default=0.0)
                rates = [*args.open_loop_rates, *(round(f * best, 1) for f in args.open_loop_load if best)]
                for rate in rates:
                    row = asyncio.run(_run_cell(server.target, server.pid, name, queries, rate=rate, duration_s=args.duration, transport=transport))
                    rows.append({"processes": processes, **row})
                    print(_table([rows[-1]]).splitlines()[-1], flush=True)
    out = {
        **provenance(),
        "dataset": dataset.name,
        "queries": len(queries),
        "index": {"documents": report.documents, "child_chunks": report.child_chunks, "dir": str(index_dir),
                  "terms": bench_index.terms_revision(index_dir)},
        "model": str(model_dir) if model_dir else "bundled int8 all-MiniLM-L6-v2",
        "reranker": reranker_note,
        "transport": transport.name,
        "machine": {"cpus": cores, "platform": platform.platform(), "processor": platform.processor(), "python": platform.python_version()},
        "duration_s": args.duration,
        # By server process count: the settings each server ran with.
        "server_settings": served,
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2))
    print()
    print(_table(rows))
    print(f"reranker: {reranker_note}\nwritten: {args.output}")
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
