from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_server.config import ConfigError, load_settings


def test_defaults_are_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RETRIEVAL_QDRANT_URL", "RETRIEVAL_QDRANT_PATH", "RETRIEVAL_MYSQL_DSN"):
        monkeypatch.delenv(var, raising=False)
    s = load_settings()
    assert (s.host, s.port) == ("0.0.0.0", 50051)
    assert s.vector_backend == "edge" and s.metadata_backend == "sqlite"
    assert (s.query_max_bytes, s.top_k_default, s.top_k_max, s.search_top_k_max) == (65_536, 5, 100, 20)


def test_environment_selects_production_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRIEVAL_QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("RETRIEVAL_MYSQL_DSN", "mysql://u:p@db:3306/retrieval")
    s = load_settings()
    assert s.vector_backend == "qdrant" and s.metadata_backend == "mysql"


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("RETRIEVAL_PORT", "not-a-port", "RETRIEVAL_PORT"),
        ("RETRIEVAL_PORT", "70000", "RETRIEVAL_PORT"),
        ("RETRIEVAL_TOP_K_MAX", "0", "RETRIEVAL_TOP_K_MAX"),
        ("RETRIEVAL_LOG_LEVEL", "LOUD", "RETRIEVAL_LOG_LEVEL"),
        ("RETRIEVAL_CHILD_CHUNK_TOKENS", "500", "child_chunk_tokens must not exceed parent_chunk_tokens"),
        ("RETRIEVAL_MYSQL_DSN", "postgres://x", "mysql_dsn"),
    ],
)
def test_invalid_values_name_the_variable(monkeypatch: pytest.MonkeyPatch, var: str, value: str, expected: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert expected in str(err.value)


def test_model_dir_without_model_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no model.onnx"):
        load_settings(model_dir=tmp_path)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"processes": 2, "qdrant_path": ":memory:"}, "qdrant-client local mode is one process per folder"),
        ({"processes": 2, "port": 0}, "needs a fixed port"),
        ({"processes": 2, "qdrant_url": "http://qdrant:6333"}, "cache_backend 'redis' or 'none'"),
    ],
)
def test_several_processes_need_storage_they_can_share(overrides: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_settings(**overrides)


def test_several_processes_over_embedded_storage_are_read_only_replicas(tmp_path: Path) -> None:
    from retrieval_server.supervisor import replica_dir, worker_settings

    s = load_settings(processes=2, data_dir=tmp_path)
    workers = [worker_settings(s, i) for i in range(2)]
    assert all(w.read_only for w in workers)
    assert [w.embedded_vectors_dir for w in workers] == [replica_dir(s, 0), replica_dir(s, 1)]
    assert [w.metrics_port for w in workers] == [s.metrics_port, s.metrics_port + 1]
    shared = load_settings(processes=2, qdrant_url="http://qdrant:6333", cache_backend="none")
    second = worker_settings(shared, 1)
    assert not second.read_only and second.vectors_dir is None  # a Qdrant server is shared and writable
