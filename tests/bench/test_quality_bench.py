"""bench.quality end to end on a small BEIR folder: a real server process, ingestion and queries over gRPC."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from bench.beir import BeirDataset
from bench.provenance import provenance
from bench.quality import index as bench_index
from bench.quality.__main__ import main, server_settings
from bench.quality.evaluate import VARIANTS, run_variant
from bench.quality.feedback import SETTINGS as FEEDBACK_SETTINGS
from bench.quality.feedback import main as feedback_main
from bench.quality.rerank_curve import CurvePoint, recommend
from bench.quality.rerank_curve import main as curve_main
from bench.quality.tune import main as tune_main
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.backends.sparse import TERMS_REVISION

DOCS = {
    "tides": ("Ocean tides", "Tides rise and fall because the moon's gravity pulls on the oceans."),
    "bread": ("Sourdough", "Sourdough bread rises because wild yeast and bacteria ferment the dough."),
    "volcano": ("Volcanoes", "A volcano erupts when pressure from molten magma forces it through the crust."),
    "insulin": ("Insulin", "Insulin is a hormone made by the pancreas that lets cells absorb glucose from blood."),
    "eclipse": ("Solar eclipse", "A solar eclipse happens when the moon passes between the sun and the earth."),
    "rainbow": ("Rainbows", "Rainbows appear when sunlight is refracted and reflected inside raindrops."),
    "vaccine": ("Vaccines", "Vaccines train the immune system to recognise a pathogen without causing disease."),
    "bees": ("Honey bees", "Honey bees communicate the location of flowers with a waggle dance."),
}
QUERIES = {
    "q1": ("why does the sea level go up and down", "tides"),
    "q2": ("how does yeast make dough rise", "bread"),
    "q3": ("what hormone controls blood sugar", "insulin"),
    "q4": ("how do bees tell each other where flowers are", "bees"),
    # A query whose id is a document id, ArguAna-style: that document is the query itself.
    "eclipse": ("the moon passes between the sun and the earth, blocking the sun", "rainbow"),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("beir")
    (d / "qrels").mkdir()
    (d / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in DOCS.items()))
    (d / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": q}) + "\n" for k, (q, _) in QUERIES.items())
                                     + json.dumps({"_id": "unjudged", "text": "not in the test split"}) + "\n")
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{k}\t{doc}\t1\n" for k, (_, doc) in QUERIES.items()))
    # A tuning split of titles -> documents, disjoint from the test queries.
    (d / "qrels" / "tune.tsv").write_text("query-id\tcorpus-id\tscore\n" + "unjudged\tvaccine\t1\n")
    return d


@pytest.mark.slow
def test_every_strategy_is_scored_through_the_api_and_the_index_is_reused(dataset: Path, tmp_path: Path) -> None:
    out, runs, index = tmp_path / "out.json", tmp_path / "runs", tmp_path / "index"
    args = ["--dataset", str(dataset), "--bundled-model", "--index-dir", str(index), "--top-k", "5", "--concurrency", "2",
            "--no-progress", "--output", str(out), "--runs-dir", str(runs)]
    assert main(args) == 0
    first = json.loads(out.read_text())
    assert first["queries"] == len(QUERIES)  # only the judged split
    assert first["index"]["documents"] == len(DOCS) and not first["index"]["reused"]
    assert first["index"]["terms"] == TERMS_REVISION  # the keyword terms the scores were measured with
    assert {k: first[k] for k in ("commit", "dirty")} == provenance()  # the code that made the numbers
    rows = {r["name"]: r for r in first["results"]}
    assert list(rows) == ["semantic", "keyword", "hybrid-rrf", "hybrid-weighted", "adaptive"]
    for r in rows.values():
        assert r["errors"] == 0 and r["latency_ms"]["p50"] > 0 and "retrieve" in r["server_stage_ms"]
    # Four easy queries hit their document first; the self-query's relevant document is not first.
    assert rows["semantic"]["measures"]["mrr@10"] >= 0.8
    semantic_run = (runs / f"{dataset.name}-semantic.run").read_text().splitlines()
    assert [line.split()[2] for line in semantic_run if line.startswith("eclipse ")][0] == "eclipse"

    assert main([*args, "--strategies", "semantic", "--drop-self"]) == 0
    second = json.loads(out.read_text())
    assert second["index"]["reused"] and second["options"]["drop_self"]
    dropped = [line.split()[2] for line in (runs / f"{dataset.name}-semantic.run").read_text().splitlines() if line.startswith("eclipse ")]
    assert "eclipse" not in dropped and dropped
    assert second["results"][0]["measures"]["mrr@10"] > rows["semantic"]["measures"]["mrr@10"]

    # Query-time techniques are switched on the command line and share the index; the parent leg
    # shapes the index (its setting is part of the index's key), so its default spelled out shares it too.
    labelled = tmp_path / "labelled.json"
    assert main([*args[:-4], "--output", str(labelled), "--strategies", "hybrid-rrf", "--parent-leg", "on", "--title-field", "off",
                 "--prf", "3", "--label=-ablated"]) == 0
    third = json.loads(labelled.read_text())
    assert third["index"]["reused"] and [r["name"] for r in third["results"]] == ["hybrid-rrf-ablated"]
    assert {k: third["settings"][k] for k in ("RETRIEVAL_PARENT_LEG", "RETRIEVAL_KEYWORD_TITLE_FIELD", "RETRIEVAL_PRF_DOCS")} == {
        "RETRIEVAL_PARENT_LEG": "true", "RETRIEVAL_KEYWORD_TITLE_FIELD": "false", "RETRIEVAL_PRF_DOCS": "3"}

    # The tuner replays the grid over one retrieval per tuning query, on the same index; never on test.
    tuned = tmp_path / "tune.json"
    assert tune_main(["--dataset", str(dataset), "--split", "test", "--index-dir", str(index)]) == 2
    assert tune_main(["--dataset", str(dataset), "--index-dir", str(index), "--bundled-model", "--pool", "16", "--output", str(tuned)]) == 0
    grid = json.loads(tuned.read_text())
    assert grid["split"] == "tune" and grid["queries"] == 1
    assert len(grid["grid"]) == 24 and all(0.0 <= g["ndcg@10"] <= 1.0 for g in grid["grid"] + grid["adaptive"])
    assert [u["fusion_unit"] for u in grid["fusion_units"]] == ["chunk", "parent", "auto"]
    # The one tuning query is short: auto fuses it per chunk.
    assert grid["fusion_units"][2]["ndcg@10"] == grid["fusion_units"][0]["ndcg@10"]
    # The granularity grid: child, parent and document vectors, SEMANTIC and HYBRID, document evidence.
    granular = tmp_path / "granularity.json"
    assert tune_main(["--dataset", str(dataset), "--index-dir", str(index), "--bundled-model", "--pool", "16", "--granularity",
                      "--output", str(granular)]) == 0
    rows = json.loads(granular.read_text())["granularity"]
    assert {r["strategy"] for r in rows} == {"semantic", "hybrid"} and {"child", "document", "child+document n/(n+25)"} <= {r["granularity"] for r in rows}
    assert {"cos max child, parent+0.000", "cos sum child, document"} <= {r["granularity"] for r in rows}  # fused by cosine too
    assert all(0.0 <= r["ndcg@10"] <= 1.0 for r in rows)
    # Fused-feedback RM3: its "off" row is the tuner's default setting, replayed by the same code.
    fed = tmp_path / "feedback.json"
    assert feedback_main(["--dataset", str(dataset), "--split", "test", "--index-dir", str(index)]) == 2
    assert feedback_main(["--dataset", str(dataset), "--index-dir", str(index), "--bundled-model", "--pool", "16", "--output", str(fed)]) == 0
    settings = json.loads(fed.read_text())["rows"]
    default = next(g for g in grid["grid"] if g["rrf_k"] == 10.0 and g["parent"] == "on" and g["keyword"] == "keyword")
    assert settings[0] == {"feedback": "off", "ndcg@10": default["ndcg@10"]} and len(settings) == 1 + len(FEEDBACK_SETTINGS)
    assert all(0.0 <= r["ndcg@10"] <= 1.0 for r in settings)


@pytest.mark.slow
def test_an_index_built_with_errors_fails_the_run_and_is_not_marked_for_reuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "beir"
    (d / "qrels").mkdir(parents=True)
    lines = [json.dumps({"_id": k, "title": t, "text": x}) for k, (t, x) in DOCS.items()]
    lines.insert(5, '{"_id": "oops", "title": "truncated line"')  # in the second batch of four
    (d / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (d / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": q}) + "\n" for k, (q, _) in QUERIES.items()))
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{k}\t{doc}\t1\n" for k, (_, doc) in QUERIES.items()))
    out, index = tmp_path / "out.json", tmp_path / "index"
    assert main(["--dataset", str(d), "--bundled-model", "--index-dir", str(index), "--top-k", "5", "--strategies", "keyword",
                 "--ingest-batch", "4", "--no-progress", "--output", str(out)]) == 1
    report = json.loads(out.read_text())
    assert report["index"]["errors"] and report["results"][0]["errors"] == 0  # the queries went well; the corpus did not
    assert not (index / bench_index.MARKER).exists() and "not marked for reuse" in capsys.readouterr().err


def test_the_marker_of_an_index_built_with_errors_is_not_reused(tmp_path: Path) -> None:
    key: dict[str, object] = {"corpus_sha256": "x"}
    bench_index.save(tmp_path, key, bench_index.IndexReport(8, 8, 8, [], 1.0, reused=False))
    assert bench_index.existing(tmp_path, key) is not None
    # As an earlier version saved it: the index lacks the documents that failed.
    bench_index.save(tmp_path, key, bench_index.IndexReport(4, 4, 4, ["b.jsonl: line 2 is not JSON"], 1.0, reused=False))
    assert bench_index.existing(tmp_path, key) is None


def test_missing_files_are_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dataset", str(tmp_path)]) == 2
    assert "corpus.jsonl is missing" in capsys.readouterr().err


def test_the_tuning_tools_name_a_missing_split_and_how_to_make_one(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    untuned = tmp_path / "untuned"
    (untuned / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (untuned / name).write_bytes((dataset / name).read_bytes())
    (tmp_path / "reranker" / "model.onnx").parent.mkdir()
    (tmp_path / "reranker" / "model.onnx").write_bytes(b"")
    args = ["--dataset", str(untuned), "--index-dir", str(tmp_path / "index")]
    # The split is checked before any index is opened: the folder stays absent.
    for tool, extra in ((tune_main, []), (feedback_main, []), (curve_main, ["--reranker-model-dir", str(tmp_path / "reranker")])):
        assert tool([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert "tune.tsv is missing" in err and "python -m bench.quality.titles" in err and "Traceback" not in err
    assert not (tmp_path / "index").exists()


async def test_answers_that_lost_a_leg_or_the_reranker_are_counted_per_row() -> None:
    no_llm = "analysis:hyde:skipped: needs an LLM"
    # Each query's answer degraded as its text says; every one ranks its document first all the same.
    degraded = {"q1": [no_llm, "rerank:failed"], "q2": [no_llm, "dense:embedding_failed"], "q3": ["metadata:store_error"], "q4": [no_llm],
                "q5": ["deadline:rerank_skipped"], "q6": ["deadline:dense_skipped"], "q7": ["keyword:no_terms"]}

    async def query(req: pb.QueryRequest, ctx: grpc.aio.ServicerContext) -> pb.QueryResponse:
        resp = pb.QueryResponse()
        resp.contexts.add(document_id=req.query, score=1.0)
        resp.metrics.degraded.extend(degraded[req.query])
        return resp

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("retrieval.v1.RetrievalService", {
        "Query": grpc.unary_unary_rpc_method_handler(query, request_deserializer=pb.QueryRequest.FromString,
                                                     response_serializer=pb.QueryResponse.SerializeToString)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        rows = {n: await run_variant(f"127.0.0.1:{port}", VARIANTS[n], {q: q for q in degraded}, {q: {q: 1} for q in degraded}, top_k=10,
                                     contexts=20, concurrency=1, drop_self=False, progress=False)
                for n in ("hybrid-rrf", "hybrid-rrf+rerank")}
    finally:
        await server.stop(None)
    # The fused order a failed reranker kept scores as well as a reranked one: only the count tells them apart.
    assert rows["hybrid-rrf+rerank"].measures["ndcg@10"] == 1.0 and rows["hybrid-rrf+rerank"].errors == 0
    assert rows["hybrid-rrf+rerank"].degraded == 5
    assert sorted(rows["hybrid-rrf+rerank"].degraded_examples) == [
        "q1: rerank:failed", "q2: dense:embedding_failed", "q3: metadata:store_error", "q5: deadline:rerank_skipped", "q6: deadline:dense_skipped"]
    # A rerank tag is the rerank rows' concern; HyDE skipped without an LLM, or a query without
    # keyword terms, is no one's.
    assert rows["hybrid-rrf"].degraded == 3 and rows["hybrid-rrf"].summary()["degraded"] == 3


def test_the_quality_server_scores_every_rerank_pair(tmp_path: Path) -> None:
    # The rerank rows share a server and many (query, text) pairs: remembered scores would time the second row's cache.
    assert server_settings({}, tmp_path, 200, 100, {})["RETRIEVAL_RERANK_PAIR_CACHE"] == "0"
    assert server_settings({}, tmp_path, 200, 100, {"RETRIEVAL_RERANK_PAIR_CACHE": "100"})["RETRIEVAL_RERANK_PAIR_CACHE"] == "100"


def test_a_blank_qrels_line_is_skipped_and_a_malformed_one_named(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    qrels = tmp_path / "qrels" / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\ttides\t1\n\nq2\tbread\t2\n\n")
    assert BeirDataset(tmp_path).qrels() == {"q1": {"tides": 1}, "q2": {"bread": 2}}
    for line in ("q3 bread 1", "q3\tbread", "q3\tbread\t1\textra", "q3\tbread\tyes"):
        qrels.write_text(f"query-id\tcorpus-id\tscore\nq1\ttides\t1\n\n{line}\n")
        with pytest.raises(ValueError, match=rf"test\.tsv:4: expected query-id, corpus-id and an integer score, separated by tabs"):
            BeirDataset(tmp_path).qrels()
    qrels.write_text("")
    with pytest.raises(ValueError, match="expected a 'query-id corpus-id score' header, got"):
        BeirDataset(tmp_path).qrels()


@pytest.mark.slow
def test_a_configured_cross_encoder_adds_the_rerank_rows(dataset: Path, tmp_path: Path) -> None:
    from scoring_core.model_builder import BertShape, build_cross_encoder

    model = tmp_path / "cross-encoder"
    model.mkdir()
    build_cross_encoder(model / "model.onnx", BertShape(hidden=32, layers=2, heads=2, intermediate=64), seed=1, init_std=0.3)
    out = tmp_path / "out.json"
    args = ["--dataset", str(dataset), "--bundled-model", "--index-dir", str(tmp_path / "index"), "--top-k", "5",
            "--no-progress", "--output", str(out), "--reranker-model-dir", str(model), "--strategies", "keyword,keyword+rerank,hybrid-rrf+rerank"]
    assert main(args) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert list(rows) == ["keyword", "keyword+rerank", "hybrid-rrf+rerank"]
    assert "rerank" in rows["keyword+rerank"]["server_stage_ms"] and rows["keyword+rerank"]["errors"] == 0
    # The quality/latency curve, in-process on the same index, over the tuning split only.
    curve_out = tmp_path / "curve.json"
    curve = ["--dataset", str(dataset), "--index-dir", str(tmp_path / "index"), "--bundled-model", "--reranker-model-dir", str(model),
             "--candidates", "2,100", "--pair-tokens", "32,64", "--top-k", "2", "--output", str(curve_out)]
    assert curve_main([*curve, "--split", "test"]) == 2
    assert curve_main([*curve[:5], "--reranker-model-dir", str(tmp_path)]) == 2  # no model.onnx there
    assert curve_main(curve) == 0
    result = json.loads(curve_out.read_text())
    points = result["points"]
    assert [(p["pair_tokens"], p["candidates"]) for p in points] == [(32, 2), (32, 100), (64, 2), (64, 100)]
    # 100 candidates score at most the fused pool (top_k 2 x 8 children; 8 documents of one child each).
    assert all(p["mean_scored"] == 2 for p in points if p["candidates"] == 2) and all(2 < p["mean_scored"] <= 16 for p in points if p["candidates"] == 100)
    assert all(0.0 <= p["ndcg_at_10"] <= 1.0 and 0 < p["rerank_p50_ms"] <= p["rerank_p95_ms"] for p in points)
    assert result["recommended"] in points
    # An untrained cross-encoder reorders the keyword ranking: the rows differ because reranking ran.
    assert rows["keyword+rerank"]["measures"] != rows["keyword"]["measures"] or rows["keyword+rerank"]["server_stage_ms"]["rerank"] > rows["keyword"]["server_stage_ms"]["rerank"]
    assert main(["--dataset", str(dataset), "--strategies", "keyword+rerank", "--bundled-model"]) == 2  # no reranker configured


@pytest.mark.slow
def test_the_benchmark_runs_over_mutual_tls(dataset: Path, tmp_path: Path) -> None:
    from tests.support.pki import Authority

    ca = Authority(tmp_path / "pki", "bench-ca")
    server, client = ca.issue("server", ips=("127.0.0.1",)), ca.issue("client", client=True)
    out = tmp_path / "out.json"
    tls = ["--tls-ca", str(ca.ca), "--tls-cert", str(server.cert), "--tls-key", str(server.key),
           "--tls-client-cert", str(client.cert), "--tls-client-key", str(client.key)]
    args = ["--dataset", str(dataset), "--bundled-model", "--index-dir", str(tmp_path / "index"), "--top-k", "5",
            "--no-progress", "--output", str(out), "--strategies", "keyword"]
    # Ingestion and every query go through the TLS server: a plaintext client could not reach it.
    assert main([*args, *tls]) == 0
    result = json.loads(out.read_text())
    assert result["transport"] == "mutual TLS"
    assert result["index"]["documents"] == len(DOCS) and result["results"][0]["errors"] == 0
    assert result["results"][0]["measures"]["mrr@10"] >= 0.6
    with pytest.raises(SystemExit, match="needs --tls-key"):
        main([*args, "--tls-ca", str(ca.ca), "--tls-cert", str(server.cert)])


def test_the_curve_recommends_the_fastest_setting_within_the_tolerance_of_the_best() -> None:
    best = CurvePoint(512, 100, 100.0, 0.700, 90.0, 120.0)
    close = CurvePoint(256, 50, 50.0, 0.696, 30.0, 40.0)
    cheap = CurvePoint(128, 10, 10.0, 0.640, 5.0, 6.0)
    assert recommend([best, close, cheap], 0.005) == close
    assert recommend([best, close, cheap], 0.0) == best
    assert recommend([best, close, cheap], 0.1) == cheap


def test_the_graph_setting_and_the_glossary_shape_the_index(dataset: Path, tmp_path: Path) -> None:
    beir = BeirDataset(dataset)

    def folder_and_key(extra: dict[str, str]) -> tuple[Path, dict[str, object]]:
        shaping = bench_index.index_settings({}, extra)
        return bench_index.default_index_dir(beir, "", shaping), bench_index.index_key(beir, shaping, None)

    default = folder_and_key({})
    # The default spelled out is the default index, in the dataset's own folder, its key naming
    # the graph setting like any other.
    assert folder_and_key({"RETRIEVAL_GRAPH_ENABLED": "true"}) == default
    assert default[0].name == beir.name
    assert default[1]["settings"] == {"RETRIEVAL_PARENT_LEG": "true", "RETRIEVAL_GRAPH_ENABLED": "true"}
    glossary = tmp_path / "glossary.txt"
    glossary.write_text("EHR = electronic health record\n")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "glossary.txt").write_text(glossary.read_text())
    graph_off = folder_and_key({"RETRIEVAL_GRAPH_ENABLED": "false"})
    with_glossary = folder_and_key({"RETRIEVAL_GLOSSARY_PATH": str(glossary)})
    # A glossary is known by its content: a copy elsewhere builds the same index, an edit another.
    assert folder_and_key({"RETRIEVAL_GLOSSARY_PATH": str(tmp_path / "copy" / "glossary.txt")}) == with_glossary
    glossary.write_text("EHR = electronic health record\nICU = intensive care unit\n")
    edited = folder_and_key({"RETRIEVAL_GLOSSARY_PATH": str(glossary)})
    shaped = [default, graph_off, with_glossary, edited]
    assert len({f for f, _ in shaped}) == len({json.dumps(k, sort_keys=True) for _, k in shaped}) == 4
    assert all(f.parent == default[0].parent for f, _ in shaped)
    with pytest.raises(ValueError, match="RETRIEVAL_GLOSSARY_PATH '.*missing.txt' is not a file"):
        folder_and_key({"RETRIEVAL_GLOSSARY_PATH": str(tmp_path / "missing.txt")})


def test_an_index_of_another_chunker_graph_rules_or_terms_is_not_reused(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    beir = BeirDataset(dataset)
    shaping = bench_index.index_settings({}, {})
    now = bench_index.index_key(beir, shaping, None)
    monkeypatch.setattr(bench_index, "CHUNKER_REVISION", bench_index.CHUNKER_REVISION + 1)
    assert bench_index.index_key(beir, shaping, None) != now
    monkeypatch.undo()
    monkeypatch.setattr(bench_index, "RULES_REVISION", bench_index.RULES_REVISION + 1)
    assert bench_index.index_key(beir, shaping, None) != now
    monkeypatch.undo()
    # An index of older keyword terms keeps them: reused, it would be measured as the current tokenizer.
    monkeypatch.setattr(bench_index, "TERMS_REVISION", bench_index.TERMS_REVISION - 1)
    assert bench_index.index_key(beir, shaping, None) != now
