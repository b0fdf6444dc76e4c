"""The committed Go and TypeScript stubs are exactly what buf.gen.yaml makes of the contract (and, for
TypeScript, clients/node/buf.gen.rpc.yaml of google.rpc's error details)."""

from __future__ import annotations

from pathlib import Path

from tests.contract.toolchain import buf, need
from tests.support.paths import REPO

GENERATED = {
    "go": ("clients/go/retrieval/v1", "*.go"),
    "typescript": ("clients/node/src/gen", "**/*.ts"),
}


def test_committed_go_and_typescript_stubs_match_the_proto(tmp_path: Path) -> None:
    need("protoc-gen-go", "apt-get install protoc-gen-go")
    need("protoc-gen-go-grpc", "apt-get install protoc-gen-go-grpc")
    for template in ("buf.gen.yaml", "clients/node/buf.gen.rpc.yaml"):  # the contract; google.rpc's details for Node
        result = buf("generate", "--template", template, "--output", str(tmp_path))
        assert result.returncode == 0, result.stdout + result.stderr
    for language, (folder, pattern) in GENERATED.items():
        fresh = {p.relative_to(tmp_path / folder) for p in (tmp_path / folder).glob(pattern)}
        committed = {p.relative_to(REPO / folder) for p in (REPO / folder).glob(pattern)}
        assert fresh, f"buf generate wrote no {language} stubs"
        assert fresh == committed, f"{language}: generated {sorted(fresh)}, committed {sorted(committed)}"
        stale = [str(p) for p in fresh if (tmp_path / folder / p).read_bytes() != (REPO / folder / p).read_bytes()]
        assert not stale, f"{language} stubs out of date (run: clients/node/node_modules/.bin/buf generate, with --template clients/node/buf.gen.rpc.yaml too): {stale}"
