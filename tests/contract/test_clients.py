"""The Go, TypeScript and Python clients, and the README's examples, against one live server.

One `retrieval-server serve` process is started and seeded with a small corpus; the Go tests
(`go test`), the TypeScript tests (`node --test`) and the Python tests below all call it, and so
does every example of the README's "Calling from ..." section.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from bench.server_process import running_server
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import RetrievalClient
from tests.contract.toolchain import GO_DIR, NODE_DIR, OFFLINE_GO, need
from tests.support.paths import REPO

pytestmark = pytest.mark.slow

CORPUS = [
    pb.DocumentInput(
        document_id="fusion-guide",
        filename="fusion-guide.md",
        content=b"# Reciprocal rank fusion\n\nReciprocal rank fusion combines the ranked lists of several retrievers. "
        b"Each document scores the sum of one over sixty plus its rank in every list, so a document that several "
        b"retrievers rank high rises to the top of the fused ranking.",
    ),
    pb.DocumentInput(
        document_id="cache-notes",
        filename="cache-notes.txt",
        title="Semantic cache",
        content=b"The semantic cache answers a repeated question from memory. Cache entries expire after one hour, "
        b"and an entry is dropped when a document it cites changes.",
    ),
    pb.DocumentInput(
        document_id="alice-salary",
        filename="alice-salary.txt",
        title="Salary review",
        content=b"Salary review for Alice: the committee approved a raise of eight percent starting in March.",
        access=pb.ACCESS_PRIVATE,
        owner_id="alice",
    ),
]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("clients-server")
    with running_server({"RETRIEVAL_DATA_DIR": str(data / "data")}, data / "server.log") as server:
        with RetrievalClient(server.target, role="ADMIN") as admin:
            report = admin.ingest(CORPUS)
        assert not report.errors and len(report.documents) == len(CORPUS)
        yield server.target


def _run(args: list[str], cwd: Path, target: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RETRIEVAL_TEST_TARGET": target}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


# --- Go ---------------------------------------------------------------------------------------


def test_go_client_tests_pass_against_the_server(target: str) -> None:
    need("go", "apt-get install golang-go")
    expected = set(re.findall(r"^func (Test\w+)\(", (GO_DIR / "retrieval" / "client_test.go").read_text(), re.M))
    result = _run([str(OFFLINE_GO), "test", "-count=1", "-json", "./..."], GO_DIR, target)
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    outcome = {e["Test"]: e["Action"] for e in events if e.get("Test") and e["Action"] in ("pass", "fail", "skip")}
    output = "".join(e.get("Output", "") for e in events) + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert outcome == {name: "pass" for name in expected}, output[-6000:]


# --- TypeScript -------------------------------------------------------------------------------


def test_typescript_client_tests_pass_against_the_server(target: str) -> None:
    node = need("node", "apt-get install nodejs")
    tsc = need(NODE_DIR / "node_modules" / ".bin" / "tsc", "npm install --prefix clients/node")
    built = _run([tsc, "-p", "tsconfig.json"], NODE_DIR, target)
    assert built.returncode == 0, built.stdout + built.stderr
    expected = len(re.findall(r"^\s*test\(", (NODE_DIR / "test" / "client.test.ts").read_text(), re.M))
    result = _run([node, "--test", "--test-reporter=tap", "dist/test/"], NODE_DIR, target)
    out = result.stdout + result.stderr
    summary = {k: int(v) for k, v in re.findall(r"^# (pass|fail|skipped|cancelled|todo) (\d+)$", result.stdout, re.M)}
    assert result.returncode == 0, out[-6000:]
    assert "# SKIP" not in result.stdout, out[-6000:]
    assert summary == {"pass": expected, "fail": 0, "skipped": 0, "cancelled": 0, "todo": 0}, out[-6000:]


# --- Python: the same checks through retrieval_client -------------------------------------------


def test_python_health(target: str) -> None:
    with RetrievalClient(target) as client:
        health = client.health()
    assert health.status in (pb.SERVING_STATUS_SERVING, pb.SERVING_STATUS_DEGRADED) and health.version
    assert any(c.name == "vector_store" and c.status == pb.SERVING_STATUS_SERVING for c in health.components)


def test_python_query_hybrid(target: str) -> None:
    with RetrievalClient(target) as client:
        resp = client.query("How does reciprocal rank fusion combine rankings?", top_k=2, strategy="hybrid", use_cache=False)
    assert 1 <= len(resp.contexts) <= 2
    top = resp.contexts[0]
    assert (top.document_id, top.metadata.title) == ("fusion-guide", "Reciprocal rank fusion")
    assert top.child_chunks and top.child_chunks[0].chunk_id.startswith(f"{top.parent_chunk_id}c")
    assert resp.metrics.strategy_used == pb.STRATEGY_HYBRID and not resp.metrics.cache_hit and resp.metrics.stages


def test_python_search(target: str) -> None:
    with RetrievalClient(target) as client:
        results = client.search("semantic cache entries expire", top_k=3).results
    assert 1 <= len(results) <= 3 and results[0].document_id == "cache-notes" and len(results[0].text) <= 800


def test_python_private_documents_follow_the_identity(target: str) -> None:
    with RetrievalClient(target) as anonymous, RetrievalClient(target, user_id="alice", role="USER") as alice:
        seen_by_anonymous = [c.document_id for c in anonymous.query("salary review raise", top_k=5, strategy="hybrid").contexts]
        seen_by_alice = [c.document_id for c in alice.query("salary review raise", top_k=5, strategy="hybrid").contexts]
    assert "alice-salary" not in seen_by_anonymous
    assert seen_by_alice[:1] == ["alice-salary"]


def test_python_fusion_rerank_and_the_stub_with_the_identity(target: str) -> None:
    """QueryRequest.fusion and .rerank were out of the client's reach, and its stub private."""
    with RetrievalClient(target, user_id="alice", role="USER") as alice:
        reranked = alice.query("salary review raise", strategy="hybrid", use_cache=False)
        kept = alice.query("salary review raise", strategy="hybrid", fusion="weighted", rerank=False, use_cache=False)
        through_stub = alice.service.Search(pb.SearchRequest(query="salary review raise", top_k=5), metadata=alice.metadata, timeout=30)
    # No reranker here: only a query that did not ask for one leaves it unreported.
    assert "rerank:unavailable" in reranked.metrics.degraded and "rerank:unavailable" not in kept.metrics.degraded
    assert kept.contexts[0].document_id == "alice-salary"
    assert through_stub.results[0].document_id == "alice-salary"  # alice's, read as hers


def test_python_ingest_query_delete_as_admin(target: str) -> None:
    doc = pb.DocumentInput(document_id="python-client-note", filename="note.txt", content=b"The Python client ingested this note about cobalt gliders.")
    with RetrievalClient(target, user_id="bob", role="USER") as user, pytest.raises(grpc.RpcError) as denied:
        user.ingest([doc])
    assert denied.value.code() is grpc.StatusCode.PERMISSION_DENIED
    with RetrievalClient(target, user_id="ops", role="ADMIN") as admin:
        ingested = admin.ingest([doc])
        assert not ingested.errors and ingested.documents[0].child_chunks >= 1
        found = admin.query("cobalt gliders", document_ids=["python-client-note"], use_cache=False)
        assert [c.document_id for c in found.contexts] == ["python-client-note"]
        assert list(admin.delete(["python-client-note"]).deleted) == ["python-client-note"]
        assert list(admin.delete(["python-client-note"]).not_found) == ["python-client-note"]


def test_python_invalid_argument_names_the_field(target: str) -> None:
    with RetrievalClient(target) as client, pytest.raises(grpc.RpcError) as err:
        client.query("anything", top_k=1000)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "top_k" in (err.value.details() or "")


def test_python_identity_values_are_what_grpc_metadata_carries(target: str) -> None:
    """As in Go and TypeScript. A token read from a file (its newline) made every call INTERNAL
    "Invalid metadata", as did a user id beyond ASCII, which is now refused without repeating it."""
    with RetrievalClient(target, token="a-token\n", user_id="alice") as client:  # auth mode none: the token is not read
        assert client.health().version
    for identity in ({"user_id": "zoë"}, {"role": "ADMIN\r\n"}, {"token": "secret\x00token"}):
        with pytest.raises(ValueError, match="printable ASCII") as err:
            RetrievalClient(target, **identity)  # type: ignore[arg-type]
        assert not any(v.strip() in str(err.value) for v in identity.values())
    RetrievalClient("dns:///localhost:50051", token="t").close()


def test_python_timeout(target: str) -> None:
    with RetrievalClient(target, timeout=1e-6) as client, pytest.raises(grpc.RpcError) as err:
        client.search("rank fusion", top_k=1)
    assert err.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED


def test_python_timeout_per_call_and_none(target: str) -> None:
    """As in Go and TypeScript: 0 is no deadline, and a call may take its own."""
    with RetrievalClient(target, timeout=1e-6) as hurried:
        assert hurried.search("rank fusion", top_k=1, timeout=60).results  # its own deadline, not the client's
    with RetrievalClient(target, timeout=None) as none:
        assert none.health().version
    with RetrievalClient(target, timeout=0) as unbounded:
        assert unbounded.health().version
        with pytest.raises(grpc.RpcError) as err:
            unbounded.query("rank fusion", timeout=1e-6)
    assert err.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED


# --- The README's examples --------------------------------------------------------------------

SECTION = "## Calling from Go / TypeScript / Python / grpcurl"
MARKED_BLOCK = re.compile(r"<!-- test: (?P<kind>file|run|grpcurl)(?: (?P<path>[^\s=]+))?(?: expect=(?P<expect>\S+))? -->\n```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)


@dataclass(frozen=True)
class Example:
    kind: str
    path: str | None
    expect: str | None
    lang: str
    body: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.path or self.lang}:{self.expect or ''}"


def readme_examples() -> list[Example]:
    readme = (REPO / "README.md").read_text()
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end != -1 else None]
    examples = [Example(**m.groupdict()) for m in MARKED_BLOCK.finditer(section)]
    fences = len(re.findall(r"^```", section, re.M)) // 2
    assert fences == len(examples), f"{fences - len(examples)} code block(s) in the section have no <!-- test: ... --> marker"
    return examples


def test_readme_section_examples_are_all_marked_for_testing() -> None:
    kinds = [e.kind for e in readme_examples()]
    assert kinds.count("file") == 2 and kinds.count("run") == 3 and kinds.count("grpcurl") == 2


def test_the_typescript_example_says_to_install_the_clients_packages_first() -> None:
    """The example's `npm run build` failed on a fresh clone (tsc not found); the tests run it where
    scripts/test.sh has installed the packages, so only the text before it can say so."""
    readme = (REPO / "README.md").read_text()
    typescript = readme[readme.index("### TypeScript", readme.index(SECTION)) :]
    assert "npm install --no-audit --no-fund" in typescript[: typescript.index("```bash\ncd clients/node && npm run build")]


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def readme_python_blocks() -> list[Any]:
    """Every Python block of the README, named by the line of its opening fence."""
    readme = (REPO / "README.md").read_text()
    return [pytest.param(m.group(1), id=f"README.md:{readme.count(chr(10), 0, m.start()) + 1}") for m in PYTHON_BLOCK.finditer(readme)]


@pytest.mark.parametrize("code", readme_python_blocks())
def test_every_readme_python_block_compiles(code: str) -> None:
    """The blocks outside the section above are not run (they need a corpus of their own, a handbook.pdf),
    but a reader pastes them: "async with" at a module's top level was a SyntaxError."""
    compile(code, "README.md", "exec")


def _grpcurl_equivalent(command: str, target: str) -> str:
    """What `grpcurl -plaintext [-H k: v]... -d JSON ADDRESS SERVICE/METHOD` does, through reflection."""
    from google.protobuf import json_format, message_factory
    from google.protobuf.descriptor_pool import DescriptorPool
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    args = shlex.split(command.replace("\\\n", " "))
    assert args[0] == "grpcurl" and "-plaintext" in args
    headers, data, positional = [], "{}", []
    it = iter(args[1:])
    for arg in it:
        if arg == "-H":
            key, _, value = next(it).partition(":")
            headers.append((key.strip().lower(), value.strip()))
        elif arg == "-d":
            data = next(it)
        elif arg != "-plaintext":
            positional.append(arg)
    address, method = positional
    assert address == "localhost:50051"
    service_name, method_name = method.split("/")
    with grpc.insecure_channel(target) as channel:
        pool = DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        descriptor = pool.FindServiceByName(service_name).FindMethodByName(method_name)
        request_class = message_factory.GetMessageClass(descriptor.input_type)
        response_class = message_factory.GetMessageClass(descriptor.output_type)
        request = json_format.Parse(data, request_class())
        call = channel.unary_unary(f"/{service_name}/{method_name}", request_serializer=request_class.SerializeToString, response_deserializer=response_class.FromString)
        response = call(request, metadata=headers, timeout=60)
    return json_format.MessageToJson(response)


@pytest.mark.parametrize("example", readme_examples(), ids=str)
def test_readme_example(example: Example, target: str) -> None:
    if example.kind == "file":
        assert example.path, "a file example names its file"
        assert example.body == (REPO / example.path).read_text(), f"README's copy of {example.path} differs from the file"
        return
    if example.kind == "grpcurl":
        output = _grpcurl_equivalent(example.body, target)
    else:
        code = example.body.replace("localhost:50051", target)
        if example.lang == "bash":
            need("go", "apt-get install golang-go")
            need(NODE_DIR / "node_modules" / ".bin" / "tsc", "npm install --prefix clients/node")
            result = _run(["bash", "-euo", "pipefail", "-c", code], REPO, target)
        else:
            assert example.lang == "python"
            result = _run([sys.executable, "-c", code], REPO, target)
        assert result.returncode == 0, result.stdout + result.stderr
        output = result.stdout
    assert example.expect and example.expect in output, output
