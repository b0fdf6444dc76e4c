"""Which RETRIEVAL_* variables exist, and loading the settings a manifest gives as the server does."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from retrieval_server.config import Settings, load_settings
from tests.support.pki import Authority

#: what a deployment authenticates with (issue #10): every manifest sets them
AUTHENTICATION = {"RETRIEVAL_AUTH_MODE", "RETRIEVAL_JWT_JWKS_URL", "RETRIEVAL_JWT_ISSUER", "RETRIEVAL_JWT_AUDIENCE",
                  "RETRIEVAL_TLS_CERT", "RETRIEVAL_TLS_KEY"}


def known_variables() -> set[str]:
    return {f"RETRIEVAL_{name.upper()}" for name in Settings.model_fields}


def load_as_served(env: Mapping[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings the server reads from ``env`` (its TLS files made here), with nothing else of
    this process's RETRIEVAL_* variables: a renamed setting, or two that conflict, fail here as
    they would at the server's start."""
    authority = Authority(tmp_path / "pki", "deploy-ca")
    pair = authority.issue("retrieval", dns=("retrieval",))
    import os

    for name in [n for n in os.environ if n.startswith("RETRIEVAL_")]:
        monkeypatch.delenv(name)
    files = {"RETRIEVAL_TLS_CERT": str(pair.cert), "RETRIEVAL_TLS_KEY": str(pair.key), "RETRIEVAL_DATA_DIR": str(tmp_path / "data")}
    if "RETRIEVAL_QDRANT_CA" in env:
        files["RETRIEVAL_QDRANT_CA"] = str(authority.ca)
    for name, value in {**env, **files}.items():
        monkeypatch.setenv(name, value)
    return load_settings()
