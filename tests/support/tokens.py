"""JWTs made by the tests (PyJWT): signed with a shared secret or with RSA keys published as a JWKS."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER, AUDIENCE = "https://idp.test", "retrieval-service"
SECRET = "test-secret-that-is-long-enough-0123456789"


def claims(sub: str | None, role: str | None = None, **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    out: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "nbf": now - 5, "exp": now + 600}
    if sub is not None:
        out["sub"] = sub
    if role is not None:
        out["role"] = role
    out.update(extra)
    return {k: v for k, v in out.items() if v is not None}


def hs256(payload: dict[str, Any], secret: str = SECRET) -> str:
    return jwt.encode(payload, secret, algorithm="HS256")


@dataclass
class RsaKeys:
    """RSA signing keys by kid, and their public JWKS."""

    keys: dict[str, rsa.RSAPrivateKey] = field(default_factory=dict)

    def add(self, kid: str) -> None:
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self) -> dict[str, Any]:
        out = []
        for kid, key in self.keys.items():
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            out.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": out}

    def sign(self, payload: dict[str, Any], kid: str, alg: str = "RS256") -> str:
        return jwt.encode(payload, self.keys[kid], algorithm=alg, headers={"kid": kid})

    def public_pem(self, kid: str) -> bytes:
        return self.keys[kid].public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def unsigned(payload: dict[str, Any]) -> str:
    """A token with ``alg: none`` (no signature)."""
    return jwt.encode(payload, None, algorithm="none")


def tampered(token: str, **changes: Any) -> str:
    """The token with its payload changed and the original signature kept."""
    header, payload, signature = token.split(".")
    data = jwt.utils.base64url_decode(payload.encode())
    body = {**json.loads(data), **changes}
    new_payload = jwt.utils.base64url_encode(json.dumps(body).encode()).decode()
    return f"{header}.{new_payload}.{signature}"


def reheaded(token: str, header: dict[str, Any]) -> str:
    """The token with ``header`` for its header and the original signature kept."""
    _, payload, signature = token.split(".")
    return f"{jwt.utils.base64url_encode(json.dumps(header).encode()).decode()}.{payload}.{signature}"


def hmac_signed_with(payload: dict[str, Any], key: bytes, kid: str) -> str:
    """HS256 over the token with ``key`` (an RSA public key's PEM, say) as the secret: the algorithm-
    confusion attack, built by hand since PyJWT refuses to make it."""
    import hashlib
    import hmac

    header = jwt.utils.base64url_encode(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    body = jwt.utils.base64url_encode(json.dumps(payload).encode())
    signing_input = header + b"." + body
    signature = jwt.utils.base64url_encode(hmac.new(key, signing_input, hashlib.sha256).digest())
    return (signing_input + b"." + signature).decode()


def claiming_alg(payload: dict[str, Any], alg: str, kid: str) -> str:
    """A token whose header claims ``alg`` and names ``kid``, with a signature of zeros: a forgery
    naming a key of another type than its algorithm (ES256 naming an RSA key, say)."""
    header = jwt.utils.base64url_encode(json.dumps({"alg": alg, "typ": "JWT", "kid": kid}).encode())
    body = jwt.utils.base64url_encode(json.dumps(payload).encode())
    return (header + b"." + body + b"." + jwt.utils.base64url_encode(b"\0" * 64)).decode()


@dataclass
class HeldJwks:
    """An identity provider's JWKS answer held until ``released``: a handler for
    ``tests.support.http_servers.json_server``; ``asked`` is set when a fetch has come."""

    keys: RsaKeys
    asked: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def __call__(self) -> dict[str, Any]:
        self.asked.set()
        self.released.wait()
        return self.keys.jwks()

