"""deploy/compose.yaml: the whole stack, each service with a health check, volumes declared, real settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.promql import REPO
from tests.deploy.settings_names import AUTHENTICATION, known_variables, load_as_served

DEPLOY = REPO / "deploy"


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_the_stack_has_every_piece_with_a_health_check() -> None:
    services = _compose()["services"]
    assert set(services) == {"retrieval", "qdrant", "mariadb", "redis", "rabbitmq", "prometheus", "grafana"}
    for name, service in services.items():
        assert service["healthcheck"]["test"][0] == "CMD", name
        assert service.get("restart") == "unless-stopped", name
    retrieval = services["retrieval"]
    for dependency in ("qdrant", "mariadb", "redis", "rabbitmq"):
        assert retrieval["depends_on"][dependency]["condition"] == "service_healthy"
    assert retrieval["build"]["dockerfile"] == "Dockerfile" and (DEPLOY / retrieval["build"]["context"] / "Dockerfile").is_file()


def test_named_volumes_are_declared_and_mounted_files_exist() -> None:
    compose = _compose()
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in compose["volumes"], f"{name} uses undeclared volume {source}"
    for secret in compose["secrets"].values():
        assert secret["file"].startswith("./secrets/")  # made by the operator (see the file's header)


def test_the_service_runs_several_workers_with_authentication_and_real_settings() -> None:
    env = _compose()["services"]["retrieval"]["environment"]
    assert int(env["RETRIEVAL_PROCESSES"]) >= 2
    assert env["RETRIEVAL_AUTH_MODE"] == "jwt" and AUTHENTICATION <= set(env)
    assert env["RETRIEVAL_QDRANT_URL"].startswith("http://qdrant:") and env["RETRIEVAL_CACHE_BACKEND"] == "redis"
    assert set(env) <= known_variables(), set(env) - known_variables()
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert prometheus["scrape_configs"][0]["static_configs"][0]["targets"] == ["retrieval:9464"]
    env_example = {line.split("=")[0] for line in (DEPLOY / ".env.example").read_text().splitlines() if "=" in line and not line.startswith("#")}
    text = (DEPLOY / "compose.yaml").read_text()
    assert all(f"${{{name}" in text for name in env_example)


def test_the_service_settings_load_as_the_server_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With deploy/.env.example's values put in, as compose does."""
    example = dict(line.split("=", 1) for line in (DEPLOY / ".env.example").read_text().splitlines() if "=" in line and not line.startswith("#"))

    def put_in(value: object) -> str:
        # ${NAME:-default} falls back to its default; ${NAME:?why} has no value without NAME
        return re.sub(r"\$\{(\w+)(?::([-?])([^}]*))?\}",
                      lambda m: example.get(m.group(1)) or (m.group(3) if m.group(2) == "-" else ""), str(value))

    env = {k: put_in(v) for k, v in _compose()["services"]["retrieval"]["environment"].items()}
    settings = load_as_served(env, tmp_path, monkeypatch)
    assert settings.auth_mode == "jwt" and settings.processes == int(env["RETRIEVAL_PROCESSES"])
