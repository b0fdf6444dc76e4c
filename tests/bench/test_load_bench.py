"""bench.load's generator and ghz plumbing against an in-process server."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bench.load import generator
from bench.load.ghz import command, summarize
from bench.load.resources import ResourceSampler
from bench.load.scenarios import RERANK_CANDIDATES, SCENARIOS
from bench.load.settings import server_settings
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource
from retrieval_server.server import RunningServer, start_server

QUERIES = ["why do tides rise", "how does sourdough rise", "what does insulin do", "how do bees find flowers"]


@pytest_asyncio.fixture(scope="module")
async def target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    running: RunningServer = await start_server(load_settings(host="127.0.0.1", port=0, metrics_port=0, data_dir=tmp_path_factory.mktemp("load")))
    texts = {
        "tides": "Tides rise and fall because the moon's gravity pulls on the oceans.",
        "bread": "Sourdough bread rises because wild yeast ferments the dough.",
        "insulin": "Insulin lets cells absorb glucose from the blood.",
        "bees": "Honey bees show each other where flowers are with a waggle dance.",
    }
    report = await running.app.ingest([DocumentSource(filename=f"{k}.txt", content=v.encode(), document_id=k) for k, v in texts.items()])
    assert not report.errors
    yield f"127.0.0.1:{running.port}"
    await running.stop(1.0)


async def test_closed_loop_measures_every_scenario(target: str) -> None:
    for name, scenario in SCENARIOS.items():
        if scenario.warm_cache:
            await generator.warm(target, scenario, QUERIES)
        # The window stays open until 5 calls completed in it, however slow the machine.
        samples = await generator.closed_loop(target, scenario, QUERIES, concurrency=4, duration_s=1.0, warmup_s=0.2, channels=2, min_calls=5)
        s = samples.summary()
        assert s["errors"] == 0 and s["requests"] >= 5 and s["rps"] > 0 and samples.elapsed_s >= 1.0, name
        assert s["p50_ms"] <= s["p95_ms"] <= s["p99_ms"]
        if scenario.method == "Query":
            assert s["stage_ms"], name  # the per-stage breakdown that says what dominates
        if name == "query-cached":
            assert s["cache_hit_rate"] == 1.0
        elif scenario.method == "Query":
            assert s["cache_hit_rate"] == 0.0


async def test_open_loop_sends_at_the_rate_and_samples_the_server(target: str) -> None:
    with ResourceSampler(os.getpid()) as sampler:
        samples = await generator.open_loop(target, SCENARIOS["search"], QUERIES, rate=40, duration_s=1.0)
    s = samples.summary()
    assert s["requests"] == 40 and s["errors"] == 0
    # The last request is due 39/40 s after the first, so the run lasts at least that long however
    # fast the server is; how much longer depends on the machine, so only the upper bound is fixed.
    assert samples.elapsed_s >= 39 / 40 and 0 < s["rps"] <= 40 / (39 / 40)
    assert sampler.usage.cpu_cores > 0 and sampler.usage.peak_rss_mb > 50


def test_ghz_command_uses_reflection_or_the_proto_and_reads_its_report(tmp_path: Path) -> None:
    scenario = SCENARIOS["query-hybrid"]
    reflection = command("ghz", scenario, "127.0.0.1:1", 8, 5, use_proto=False, output=tmp_path / "o.json")
    with_proto = command("ghz", scenario, "127.0.0.1:1", 8, 5, use_proto=True, output=tmp_path / "o.json")
    assert "--proto" not in reflection and reflection[-1] == "127.0.0.1:1"
    assert with_proto[with_proto.index("--proto") + 1].endswith("protos/retrieval/v1/retrieval.proto")
    assert Path(with_proto[with_proto.index("--config") + 1]).is_file()
    data = scenario.ghz_data(["what is a tide"])
    assert data == [{"query": "what is a tide", "top_k": 5, "strategy": "STRATEGY_HYBRID", "use_cache": False, "rerank": False}]
    report = {"count": 10, "rps": 99.5, "latencyDistribution": [{"percentage": 50, "latency": 2_000_000}, {"percentage": 95, "latency": 5_000_000},
              {"percentage": 99, "latency": 9_000_000}], "errorDistribution": {"rpc error: code = Unavailable": 2}}
    assert summarize(report) == {"rps": 99.5, "p50_ms": 2.0, "p95_ms": 5.0, "p99_ms": 9.0, "count": 10, "errors": 2}


async def test_the_generator_speaks_mutual_tls(tmp_path: Path) -> None:
    from bench.transport import Transport
    from tests.support.pki import Authority

    ca = Authority(tmp_path / "pki", "bench-ca")
    server, client = ca.issue("server", ips=("127.0.0.1",)), ca.issue("client", client=True)
    transport = Transport(ca=ca.ca, cert=server.cert, key=server.key, client_cert=client.cert, client_key=client.key)
    settings = {k.removeprefix("RETRIEVAL_").lower(): v for k, v in transport.server_settings().items()}
    assert set(settings) == {"tls_cert", "tls_key", "tls_client_ca"}
    running = await start_server(load_settings(host="127.0.0.1", port=0, metrics_port=0, data_dir=tmp_path / "data", **settings))
    try:
        await running.app.ingest([DocumentSource(filename="t.txt", content=b"Tides rise because of the moon.", document_id="tides")])
        target = f"127.0.0.1:{running.port}"
        # No warm-up: the first call counts, handshake included, and the window is one a busy machine answers it in.
        samples = await generator.closed_loop(target, SCENARIOS["search"], QUERIES, concurrency=2, duration_s=2.0, warmup_s=0.0, transport=transport)
        assert samples.summary()["errors"] == 0 and samples.summary()["requests"] > 0
        plaintext = await generator.closed_loop(target, SCENARIOS["search"], QUERIES, concurrency=1, duration_s=2.0, warmup_s=0.0, timeout_s=60)
        s = plaintext.summary()
        assert s["requests"] == s["errors"] > 0  # a plaintext client cannot talk to it
    finally:
        await running.stop(1.0)


@pytest.mark.slow
def test_the_report_records_each_servers_settings_and_the_commit(tmp_path: Path) -> None:
    import json

    from bench.load.__main__ import main
    from bench.provenance import provenance

    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": str(i), "title": "", "text": q}) + "\n" for i, q in enumerate(QUERIES)))
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(QUERIES)))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{i}\t1\n" for i in range(len(QUERIES))))
    out = tmp_path / "load.json"
    assert main(["--dataset", str(beir), "--bundled-model", "--index-dir", str(tmp_path / "index"), "--scenarios", "search",
                 "--concurrency", "1", "--processes", "1", "--open-loop-load", "", "--duration", "0.2", "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {k: report[k] for k in ("commit", "dirty")} == provenance()
    served = report["server_settings"]["1"]
    assert served["RETRIEVAL_PROCESSES"] == "1" and served["RETRIEVAL_DATA_DIR"] == str((tmp_path / "index").resolve())
    assert served["RETRIEVAL_RERANK_PAIR_CACHE"] == "0"


def test_the_load_server_scores_every_rerank_pair(tmp_path: Path) -> None:
    # Every cell asks the same queries from the first, so remembered pair scores would time the cache, not the cross-encoder.
    settings = server_settings({}, tmp_path / "index", 2, tmp_path / "reranker", RERANK_CANDIDATES)
    assert settings["RETRIEVAL_RERANK_PAIR_CACHE"] == "0"
    assert server_settings({}, tmp_path, 1, tmp_path, RERANK_CANDIDATES, RETRIEVAL_RERANK_PAIR_CACHE="100")["RETRIEVAL_RERANK_PAIR_CACHE"] == "100"
