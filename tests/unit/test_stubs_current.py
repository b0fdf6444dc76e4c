"""The committed stubs must be exactly what protoc makes of the committed .proto."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.support.paths import REPO


def _generate_module():
    spec = importlib.util.spec_from_file_location("protos_generate", REPO / "protos" / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_stubs_match_the_proto(tmp_path: Path) -> None:
    files = _generate_module().generate(tmp_path)
    assert files, "protoc produced nothing"
    stale = [
        str(f)
        for f in files
        if (tmp_path / f).read_bytes() != (REPO / "clients" / "python" / f).read_bytes()
    ]
    assert not stale, f"stubs out of date with protos/ (run: python protos/generate.py): {stale}"


def test_stubs_import_from_the_installed_package() -> None:
    from retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc

    assert retrieval_pb2.DESCRIPTOR.package == "retrieval.v1"
    methods = {m.name for m in retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"].methods}
    assert {"Query", "Search", "Health", "IngestDocuments", "DeleteDocuments"} <= methods
    assert hasattr(retrieval_pb2_grpc, "RetrievalServiceStub")
