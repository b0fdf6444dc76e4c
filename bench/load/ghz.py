"""The load scenarios through ghz (https://ghz.sh), collected into one table.

    python -m bench.load.ghz --write-data          # request files from the dataset's queries, for the configs
    ghz --config bench/load/ghz/query.json          # one run by hand (server reflection)
    python -m bench.load.ghz                        # every scenario x concurrency, reflection and --proto

Run from the repository root (the configs name their data files relative to it). The server is
started here on the bench index unless --target points at a running one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

from bench.beir import BeirDataset, shared_dir
from bench.load import generator
from bench.load.reranker import reranker_dir
from bench.load.scenarios import RERANK_CANDIDATES, SCENARIOS, Scenario
from bench.quality import index as bench_index
from bench.server_process import running_server

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {"Query": ROOT / "bench/load/ghz/query.json", "Search": ROOT / "bench/load/ghz/search.json"}
PROTO = ROOT / "protos/retrieval/v1/retrieval.proto"
DATA_DIR = bench_index.RESULTS / "ghz"


def data_file(scenario: Scenario) -> Path:
    return DATA_DIR / f"{scenario.name}.data.json"


def write_data(queries: list[str]) -> None:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS.values():
        data_file(scenario).write_text(json.dumps(scenario.ghz_data(queries)))


def command(ghz: str, scenario: Scenario, target: str, concurrency: int, duration_s: float, *, use_proto: bool, output: Path) -> list[str]:
    """ghz with the committed config of the RPC; flags override its host, load and data."""
    cmd = [
        ghz, "--config", str(CONFIGS[scenario.method]), "--data-file", str(data_file(scenario)),
        "--concurrency", str(concurrency), "--connections", str(concurrency), "--duration", f"{duration_s:g}s",
        "--format", "json", "--output", str(output),
    ]
    if use_proto:
        cmd += ["--proto", str(PROTO), "--import-paths", str(PROTO.parents[2])]
    return [*cmd, target]


def summarize(report: dict[str, object]) -> dict[str, object]:
    """The fields of ghz's JSON report that the table shows (latencies in ns)."""
    dist = {int(d["percentage"]): d["latency"] / 1e6 for d in report.get("latencyDistribution") or []}  # type: ignore[union-attr]
    errors = sum((report.get("errorDistribution") or {}).values())  # type: ignore[union-attr]
    return {"rps": round(float(report["rps"]), 2), "p50_ms": dist.get(50), "p95_ms": dist.get(95), "p99_ms": dist.get(99),
            "count": report["count"], "errors": errors}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.load.ghz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=shared_dir() / "datasets" / "scifact")
    p.add_argument("--write-data", action="store_true", help="only write the request files")
    p.add_argument("--target", help="a running server (default: start one on the bench index)")
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--duration", type=float, default=15.0)
    p.add_argument("--ghz", default="ghz", help="ghz binary")
    p.add_argument("--output", type=Path, default=bench_index.RESULTS / "ghz.json")
    args = p.parse_args(argv)
    dataset = BeirDataset(args.dataset.resolve())
    dataset.check()
    write_data(list(dataset.queries().values()))
    if args.write_data:
        print(f"written: {DATA_DIR}")
        return 0
    ghz = shutil.which(args.ghz)
    if ghz is None:
        print(f"ghz not found ({args.ghz}); install it from https://ghz.sh or use `python -m bench.load`", file=sys.stderr)
        return 2
    rows = []

    def run(target: str) -> None:
        for scenario in SCENARIOS.values():
            if scenario.warm_cache:
                asyncio.run(generator.warm(target, scenario, list(dataset.queries().values())))
            for c in (int(x) for x in args.concurrency.split(",")):
                for use_proto in (False, True):
                    out = DATA_DIR / f"{scenario.name}-c{c}-{'proto' if use_proto else 'reflection'}.json"
                    subprocess.run(command(ghz, scenario, target, c, args.duration, use_proto=use_proto, output=out), check=True)
                    rows.append({"scenario": scenario.name, "concurrency": c, "schema": "proto" if use_proto else "reflection",
                                 **summarize(json.loads(out.read_text()))})
                    print(rows[-1], flush=True)

    if args.target:
        run(args.target)
    else:
        model_dir = bench_index.default_model_dir()
        base = {"RETRIEVAL_MODEL_DIR": str(model_dir)} if model_dir else {}
        index_dir = bench_index.default_index_dir(dataset)
        bench_index.ensure(dataset, index_dir, base, model_dir, batch=200, progress=True, log=DATA_DIR / "ingest.log")
        reranker, _ = reranker_dir(None)
        settings = {**base, "RETRIEVAL_DATA_DIR": str(index_dir), "RETRIEVAL_RERANKER_MODEL_DIR": str(reranker),
                    "RETRIEVAL_RERANK_CANDIDATES": str(RERANK_CANDIDATES), "RETRIEVAL_LOG_LEVEL": "WARNING",
                    # As in bench.load: every run repeats the same queries, which must reach the cross-encoder.
                    "RETRIEVAL_RERANK_PAIR_CACHE": "0"}
        with running_server(settings, DATA_DIR / "server.log") as server:
            run(server.target)
    args.output.write_text(json.dumps(rows, indent=2))
    print("| scenario | c | schema | req/s | p50 ms | p95 ms | p99 ms | errors |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['scenario']} | {r['concurrency']} | {r['schema']} | {r['rps']} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p99_ms']:.1f} | {r['errors']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
