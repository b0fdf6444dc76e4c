"""Which RETRIEVAL_* variables exist: the Settings fields, plus the authentication settings of issue #10."""

from __future__ import annotations

from retrieval_server.config import Settings

#: Named by issue #10 (TLS and JWT authentication), being added to Settings by the lead.
AUTHENTICATION = {"RETRIEVAL_AUTH_MODE", "RETRIEVAL_JWT_JWKS_URL", "RETRIEVAL_JWT_ISSUER", "RETRIEVAL_JWT_AUDIENCE",
                  "RETRIEVAL_TLS_CERT", "RETRIEVAL_TLS_KEY"}


def known_variables() -> set[str]:
    return {f"RETRIEVAL_{name.upper()}" for name in Settings.model_fields} | AUTHENTICATION
