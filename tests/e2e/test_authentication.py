"""Authenticated callers (issue #10): real TLS handshakes, real tokens, error details, the audit log.

Certificates are made by tests/support/pki.py and tokens by tests/support/tokens.py; every server
here is a real grpc.aio server on loopback, called through the Python client or raw stubs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from google.rpc import error_details_pb2, status_pb2

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import AsyncRetrievalClient, Tls
from retrieval_server.config import load_settings
from retrieval_server.domain import Access, DocumentSource
from retrieval_server.server import RunningServer, start_server
from tests.support.http_servers import get_json_server
from tests.support.pki import Authority
from tests.support.tokens import AUDIENCE, ISSUER, SECRET, HeldJwks, RsaKeys, claiming_alg, claims, hmac_signed_with, hs256, reheaded, tampered, unsigned

pytestmark = pytest.mark.slow

CORPUS = [
    DocumentSource(filename="policy.txt", content=b"The salary policy: every salary increase is reviewed once a year.", document_id="policy"),
    DocumentSource(filename="a.txt", content=b"Alice's salary increase is 7 percent this year.", document_id="alice-review",
                   access=Access.PRIVATE, owner_id="alice"),
    DocumentSource(filename="b.txt", content=b"Bob's salary increase is 4 percent; carol may read this review.", document_id="bob-review",
                   access=Access.PRIVATE, owner_id="bob", granted_user_ids=("carol",)),
    DocumentSource(filename="e.txt", content=b"The engineering group's salary increase budget is 5 percent.", document_id="eng-budget",
                   access=Access.PRIVATE, owner_id="hr", granted_user_ids=("group:eng",)),
]
PRIVATE = {"alice-review", "bob-review", "eng-budget"}
QUESTION = "what is the salary increase"


@asynccontextmanager
async def serving(data: Path, **settings: Any) -> AsyncIterator[RunningServer]:
    """A server over a fresh copy of the corpus, with these settings."""
    s = load_settings(host="127.0.0.1", port=0, metrics_port=0, data_dir=data, **settings)
    running = await start_server(s)
    try:
        if not await running.app.metadata.count_documents():
            assert not (await running.app.ingest(CORPUS)).errors
        yield running
    finally:
        await running.stop(1.0)


def details(err: grpc.aio.AioRpcError) -> list[Any]:
    """The google.rpc details of an error (grpc-status-details-bin), unpacked."""
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    assert raw, f"no error details on {err.code()}: {err.details()}"
    status = status_pb2.Status.FromString(raw)
    out = []
    for any_ in status.details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest, error_details_pb2.RetryInfo):
            if any_.Is(kind.DESCRIPTOR):
                msg = kind()
                any_.Unpack(msg)
                out.append(msg)
    return out


def reason(err: grpc.aio.AioRpcError) -> str:
    return next(d.reason for d in details(err) if isinstance(d, error_details_pb2.ErrorInfo))


def docs(resp: pb.QueryResponse | pb.SearchResponse) -> set[str]:
    items = resp.contexts if isinstance(resp, pb.QueryResponse) else resp.results
    return {c.document_id for c in items}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("pki")
    ca, other = Authority(root / "ca", "test-ca"), Authority(root / "other", "other-ca")
    return {
        "ca": ca,
        "server": ca.issue("server", dns=("localhost",), ips=("127.0.0.1",)),
        "gateway": ca.issue("gateway.internal", dns=("gateway.internal",), client=True),
        "intruder": ca.issue("intruder", dns=("intruder.internal",), client=True),
        # A gateway's name in the CN only: its SANs say who it is.
        "impostor": ca.issue("gateway.internal", dns=("impostor.internal",), client=True,
                             cert_path=root / "impostor.pem", key_path=root / "impostor-key.pem"),
        # A gateway's name as an e-mail address, which CAs check far less than a host name.
        "mailer": ca.issue("mailer", emails=("gateway.internal",), client=True),
        # No SAN: the CN is the name, when there is one CN (grpc names the first of several).
        "cn-only": ca.issue("gateway.internal", client=True, cert_path=root / "cn-only.pem", key_path=root / "cn-only-key.pem"),
        "two-cns": ca.issue("gateway.internal", more_common_names=("intruder",), client=True,
                            cert_path=root / "two-cns.pem", key_path=root / "two-cns-key.pem"),
        "foreign": other.issue("foreign-client", client=True),
    }


def _served_serial(port: int, ca: Path) -> int:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port)) as raw, ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).serial_number


# --- transport ----------------------------------------------------------------------------------


async def test_tls_and_mutual_tls_refuse_clients_without_a_trusted_certificate(tmp_path: Path, pki: dict[str, Any]) -> None:
    ca, server = pki["ca"], pki["server"]
    async with serving(tmp_path / "tls", tls_cert=server.cert, tls_key=server.key) as srv:
        target = f"127.0.0.1:{srv.port}"
        async with AsyncRetrievalClient(target, tls=Tls(ca=ca.ca)) as client:
            assert (await client.health()).status == pb.SERVING_STATUS_SERVING
        async with AsyncRetrievalClient(target, timeout=10) as plaintext:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await plaintext.health()
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    async with serving(tmp_path / "mtls", tls_cert=server.cert, tls_key=server.key, tls_client_ca=ca.ca) as srv:
        target = f"127.0.0.1:{srv.port}"
        gateway, foreign = pki["gateway"], pki["foreign"]
        async with AsyncRetrievalClient(target, tls=Tls(ca=ca.ca, cert=gateway.cert, key=gateway.key)) as client:
            assert (await client.health()).status == pb.SERVING_STATUS_SERVING
        for refused in (Tls(ca=ca.ca), Tls(ca=ca.ca, cert=foreign.cert, key=foreign.key)):
            async with AsyncRetrievalClient(target, tls=refused, timeout=10) as client:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await client.health()
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE  # refused in the handshake


async def test_a_rotated_certificate_is_served_without_a_restart(tmp_path: Path, pki: dict[str, Any]) -> None:
    ca = pki["ca"]
    first = ca.issue("rotating", dns=("localhost",), ips=("127.0.0.1",), cert_path=tmp_path / "server.pem", key_path=tmp_path / "server-key.pem")
    async with serving(tmp_path / "data", tls_cert=first.cert, tls_key=first.key, metrics_tls=True) as srv:
        assert srv.metrics_port is not None
        for port in (srv.port, srv.metrics_port):
            assert await asyncio.to_thread(_served_serial, port, ca.ca) == first.serial
        second = ca.issue("rotating", dns=("localhost",), ips=("127.0.0.1",), cert_path=first.cert, key_path=first.key)
        assert second.serial != first.serial
        # /metrics (with the gRPC port's certificate) follows the files too.
        for port in (srv.port, srv.metrics_port):
            assert await asyncio.to_thread(_served_serial, port, ca.ca) == second.serial
        async with AsyncRetrievalClient(f"127.0.0.1:{srv.port}", tls=Tls(ca=ca.ca)) as client:
            assert (await client.health()).status == pb.SERVING_STATUS_SERVING


# --- jwt ------------------------------------------------------------------------------------------


JWT = {"auth_mode": "jwt", "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}


async def _query(target: str, token: str | None, **headers: str) -> pb.QueryResponse:
    groups = headers["groups"].split(",") if "groups" in headers else ()
    async with AsyncRetrievalClient(target, token=token, user_id=headers.get("user"), role=headers.get("role"), groups=groups) as client:
        return await client.query(QUESTION, top_k=5, strategy="hybrid", use_cache=False)


async def test_hs256_tokens_verified_and_refused_with_stable_reasons(tmp_path: Path) -> None:
    async with serving(tmp_path, jwt_secret=SECRET, **JWT) as srv:
        target = f"127.0.0.1:{srv.port}"
        assert docs(await _query(target, hs256(claims("alice", "USER")))) & PRIVATE == {"alice-review"}
        # Pairs, not a dict: one reason stands for several tokens.
        refused = [
            ("TOKEN_MISSING", None),
            ("TOKEN_ALGORITHM", unsigned(claims("alice", "SUPER_ADMIN"))),
            ("TOKEN_ISSUER", hs256(claims("alice", iss="https://evil.test"))),
            ("TOKEN_AUDIENCE", hs256(claims("alice", aud="another-service"))),
            ("TOKEN_EXPIRED", hs256(claims("alice", exp=int(time.time()) - 120))),
            ("TOKEN_NOT_YET_VALID", hs256(claims("alice", nbf=int(time.time()) + 300))),
            ("TOKEN_SIGNATURE", tampered(hs256(claims("alice", "USER")), sub="bob", role="SUPER_ADMIN")),
            ("TOKEN_MALFORMED", "not-a-jwt"),
            ("TOKEN_CLAIM_MISSING", hs256(claims(None, "ADMIN"))),
            # A token without exp would be good for ever (README: exp is required).
            ("TOKEN_CLAIM_MISSING", hs256(claims("alice", "SUPER_ADMIN", exp=None))),
            # A user named like a group would read what is granted to the group (eng-budget).
            ("TOKEN_CLAIM_INVALID", hs256(claims("group:eng", "USER"))),
        ]
        for expected, token in refused:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await _query(target, token)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, expected
            assert reason(err.value) == expected, (expected, err.value.details())
            assert SECRET not in (err.value.details() or "")
        # Headers PyJWT reads but refuses: they were answered UNKNOWN, without details.
        for header in ({"alg": "HS256", "kid": 5}, {"alg": "HS256", "crit": ["x"], "x": 1}):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await _query(target, reheaded(hs256(claims("alice", "SUPER_ADMIN")), header))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and reason(err.value) == "TOKEN_MALFORMED", header
        # Health answers without credentials, and refuses invalid ones.
        async with AsyncRetrievalClient(target) as client:
            assert (await client.health()).status == pb.SERVING_STATUS_SERVING
        async with AsyncRetrievalClient(target, token="not-a-jwt") as client:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.health()
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_headers_never_outrank_the_token(tmp_path: Path) -> None:
    async with serving(tmp_path, jwt_secret=SECRET, **JWT) as srv:
        target = f"127.0.0.1:{srv.port}"
        alice = hs256(claims("alice", "USER"))
        for headers in ({"user": "bob"}, {"user": "bob", "role": "SUPER_ADMIN"}, {"role": "SUPER_ADMIN"}, {"user": "alice", "groups": "eng"}):
            assert docs(await _query(target, alice, **headers)) & PRIVATE == {"alice-review"}, headers
        async with AsyncRetrievalClient(target, token=alice, role="SUPER_ADMIN") as client:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.delete(["policy"])
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED and reason(err.value) == "ROLE_REQUIRED"


async def test_two_bearer_tokens_are_refused(tmp_path: Path) -> None:
    """Which of two tokens names the caller is a guess: neither is believed (the last one used to be)."""
    async with serving(tmp_path, jwt_secret=SECRET, **JWT) as srv:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}")
        try:
            from retrieval.v1 import retrieval_pb2_grpc

            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            alice, root = hs256(claims("alice", "USER")), hs256(claims("root", "SUPER_ADMIN"))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Query(pb.QueryRequest(query=QUESTION), metadata=(("authorization", f"Bearer {alice}"), ("authorization", f"Bearer {root}")))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and reason(err.value) == "TOKEN_MALFORMED"
            # In this mode the identity headers are not read: sent twice, they are still ignored.
            resp = await stub.Query(pb.QueryRequest(query=QUESTION, top_k=5, strategy=pb.STRATEGY_HYBRID, use_cache=False),
                                    metadata=(("authorization", f"Bearer {alice}"), ("x-user-id", "bob"), ("x-user-id", "carol")))
            assert docs(resp) & PRIVATE == {"alice-review"}
        finally:
            await channel.close()


async def test_a_token_of_as_many_groups_as_allowed_is_verified_and_a_longer_header_is_named(tmp_path: Path) -> None:
    """A token of 1,000 groups of 255 characters is 344 KB: gRPC held a call's metadata to the groups
    header's limit (321,536 bytes) and reset the call, RESOURCE_EXHAUSTED naming nothing, before
    the token reached the verifier."""
    from retrieval.v1 import retrieval_pb2_grpc
    from retrieval_server.api.identity import MAX_AUTHORIZATION_BYTES, MAX_IDENTITY_HEADER_BYTES
    from retrieval_server.identifiers import MAX_GROUPS, MAX_USER_ID_CHARS

    groups = ["eng"] + [f"{i:04d}" + "g" * (MAX_USER_ID_CHARS - 4) for i in range(MAX_GROUPS - 1)]
    token = hs256(claims("dave", "USER", groups=groups))
    assert len(token) > MAX_IDENTITY_HEADER_BYTES
    async with serving(tmp_path, jwt_secret=SECRET, jwt_groups_claim="groups", **JWT) as srv:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}")
        try:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            resp = await stub.Query(pb.QueryRequest(query=QUESTION, top_k=5, strategy=pb.STRATEGY_HYBRID, use_cache=False),
                                    metadata=(("authorization", f"Bearer {token}"),))
            assert docs(resp) & PRIVATE == {"eng-budget"}
            too_long = "Bearer " + "a" * (MAX_AUTHORIZATION_BYTES + 1 - len("Bearer "))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Query(pb.QueryRequest(query=QUESTION), metadata=(("authorization", too_long),))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and reason(err.value) == "TOKEN_MALFORMED", err.value.details()
            assert err.value.details() == f"authorization must be at most {MAX_AUTHORIZATION_BYTES} bytes (got {MAX_AUTHORIZATION_BYTES + 1})"
        finally:
            await channel.close()


async def test_jwks_file_rs256_and_no_algorithm_confusion(tmp_path: Path) -> None:
    keys = RsaKeys()
    keys.add("k1")
    (tmp_path / "jwks.json").write_text(json.dumps(keys.jwks()))
    async with serving(tmp_path / "data", jwt_jwks_file=tmp_path / "jwks.json", **JWT) as srv:
        target = f"127.0.0.1:{srv.port}"
        assert docs(await _query(target, keys.sign(claims("bob", "USER"), "k1"))) & PRIVATE == {"bob-review"}
        # HS256 "signed" with the RSA public key (the classic confusion attack), an unknown kid, alg none.
        confused = hmac_signed_with(claims("bob", "SUPER_ADMIN"), keys.public_pem("k1"), "k1")
        other = RsaKeys()
        other.add("k9")
        # An accepted algorithm naming a key of another type: PyJWT fails outside its token errors.
        mismatched = [claiming_alg(claims("bob", "SUPER_ADMIN"), alg, "k1") for alg in ("ES256", "EdDSA")]
        for token, expected in ((confused, "TOKEN_ALGORITHM"), (other.sign(claims("bob"), "k9"), "TOKEN_KEY_UNKNOWN"),
                                (unsigned(claims("bob", "SUPER_ADMIN")), "TOKEN_ALGORITHM"), *((t, "TOKEN_ALGORITHM") for t in mismatched)):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await _query(target, token)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and reason(err.value) == expected


async def test_jwks_url_follows_a_key_rotation_and_maps_claims(tmp_path: Path) -> None:
    keys = RsaKeys()
    keys.add("2026-01")
    settings = dict(JWT, jwt_role_claim="realm_access.roles", jwt_role_map="realm-admin=ADMIN,staff=USER", jwt_groups_claim="groups",
                    jwt_jwks_min_refresh_s=0.0)
    with get_json_server(keys.jwks) as idp:
        async with serving(tmp_path, jwt_jwks_url=f"{idp.url}/jwks", **settings) as srv:
            target = f"127.0.0.1:{srv.port}"
            dave = claims("dave", realm_access={"roles": ["staff"]}, groups=["eng"])
            assert docs(await _query(target, keys.sign(dave, "2026-01"))) & PRIVATE == {"eng-budget"}  # a group grant
            fetches = len(idp.requests)
            keys.add("2026-02")
            del keys.keys["2026-01"]
            assert docs(await _query(target, keys.sign(dave, "2026-02"))) & PRIVATE == {"eng-budget"}
            assert len(idp.requests) == fetches + 1  # fetched again for the new kid, once
            admin = claims("erin", realm_access={"roles": ["staff", "realm-admin"]})
            async with AsyncRetrievalClient(target, token=keys.sign(admin, "2026-02")) as client:
                assert (await client.delete(["no-such-doc"])).not_found == ["no-such-doc"]  # ADMIN through the role map


# --- gateway ------------------------------------------------------------------------------------


async def test_gateway_headers_are_trusted_from_allowed_peers_only(tmp_path: Path, pki: dict[str, Any]) -> None:
    ca, server, gateway, intruder = pki["ca"], pki["server"], pki["gateway"], pki["intruder"]
    async with serving(tmp_path, auth_mode="gateway", tls_cert=server.cert, tls_key=server.key, tls_client_ca=ca.ca,
                       gateway_peers="gateway.internal") as srv:
        target = f"127.0.0.1:{srv.port}"
        through_gateway = Tls(ca=ca.ca, cert=gateway.cert, key=gateway.key)
        cn_only = pki["cn-only"]
        for tls in (through_gateway, Tls(ca=ca.ca, cert=cn_only.cert, key=cn_only.key)):
            async with AsyncRetrievalClient(target, tls=tls, user_id="alice", role="USER") as client:
                assert docs(await client.query(QUESTION, top_k=5, strategy="hybrid")) & PRIVATE == {"alice-review"}
        # The gateway forwards the user's groups: a member reads what is granted to the group, no one else does.
        for user, groups, readable in (("dave", ["eng"], {"eng-budget"}), ("dave", ["sales", "eng"], {"eng-budget"}),
                                       ("erin", ["sales"], set()), ("dave", [], set())):
            async with AsyncRetrievalClient(target, tls=through_gateway, user_id=user, groups=groups) as client:
                assert docs(await client.query(QUESTION, top_k=5, strategy="hybrid", use_cache=False)) & PRIVATE == readable, (user, groups)
        for peer, headers in itertools.product((intruder, pki["impostor"], pki["mailer"], pki["two-cns"]),
                                               ({"user_id": "alice", "role": "SUPER_ADMIN"}, {"user_id": "dave", "groups": ["eng"]}, {})):
            async with AsyncRetrievalClient(target, tls=Tls(ca=ca.ca, cert=peer.cert, key=peer.key), **headers) as client:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await client.query(QUESTION, top_k=5)
                assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and reason(err.value) == "PEER_NOT_ALLOWED"
        # Who sends identity headers comes before how they are formed: the intruder's repeated header
        # is refused for the intruder, not as a malformed request.
        intruder_tls = Tls(ca=ca.ca, cert=intruder.cert, key=intruder.key)
        async with grpc.aio.secure_channel(target, intruder_tls.credentials(), options=intruder_tls.options()) as channel:
            from retrieval.v1 import retrieval_pb2_grpc

            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Query(pb.QueryRequest(query=QUESTION), metadata=(("x-user-role", "USER"), ("x-user-role", "ADMIN")))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and reason(err.value) == "PEER_NOT_ALLOWED"
            # Health answers a peer without credentials, but groups are credentials: refused as any identity header is.
            assert (await stub.Health(pb.HealthRequest())).status == pb.SERVING_STATUS_SERVING
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Health(pb.HealthRequest(), metadata=(("x-user-groups", "eng"),))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and reason(err.value) == "PEER_NOT_ALLOWED"


# --- errors a program can read, and the audit log -----------------------------------------------


async def test_every_invalid_field_is_a_bad_request_violation(tmp_path: Path) -> None:
    async with serving(tmp_path) as srv:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}")
        try:
            from retrieval.v1 import retrieval_pb2_grpc

            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Query(pb.QueryRequest(query=" ", top_k=1000, strategy=42))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            [bad] = [d for d in details(err.value) if isinstance(d, error_details_pb2.BadRequest)]
            assert [v.field for v in bad.field_violations] == ["query", "top_k", "strategy"]
            assert all(v.description for v in bad.field_violations)
        finally:
            await channel.close()


async def test_admin_actions_are_audited(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with serving(tmp_path, jwt_secret=SECRET, **JWT) as srv:
        target = f"127.0.0.1:{srv.port}"
        with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
            async with AsyncRetrievalClient(target, token=hs256(claims("ops", "ADMIN"))) as client:
                await client.delete(["policy", "missing"])
            async with AsyncRetrievalClient(target, token=hs256(claims("mallory", "USER"))) as client:
                with pytest.raises(grpc.aio.AioRpcError):
                    await client.ingest([pb.DocumentInput(filename="x.txt", content=b"x")])
            # Attempts whose credentials are refused are admin actions too; a query is not one.
            async with AsyncRetrievalClient(target, token=hs256(claims("ops", "ADMIN"), secret="another-secret-" * 3)) as client:
                with pytest.raises(grpc.aio.AioRpcError):
                    await client.delete(["policy"])
                with pytest.raises(grpc.aio.AioRpcError):
                    await client.query(QUESTION)
            async with AsyncRetrievalClient(target) as client:
                with pytest.raises(grpc.aio.AioRpcError):
                    await client.ingest([pb.DocumentInput(filename="x.txt", content=b"x")])
            async with AsyncRetrievalClient(target, token=reheaded(hs256(claims("ops", "ADMIN")), {"alg": "HS256", "kid": 5})) as client:
                with pytest.raises(grpc.aio.AioRpcError):
                    await client.delete(["policy"])
    lines = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert [(r.rpc, r.user, r.role, r.verified_by, r.outcome) for r in lines] == [  # type: ignore[attr-defined]
        ("DeleteDocuments", "ops", "ADMIN", "jwt", "OK"),
        ("IngestDocuments", "mallory", "USER", "jwt", "PERMISSION_DENIED"),
        ("DeleteDocuments", "", "", "", "UNAUTHENTICATED"),
        ("IngestDocuments", "", "", "", "UNAUTHENTICATED"),
        ("DeleteDocuments", "", "", "", "UNAUTHENTICATED"),
    ]
    assert lines[0].deleted == ["policy"] and lines[0].documents == ["policy", "missing"]  # type: ignore[attr-defined]
    assert lines[0].documents_truncated is False and lines[0].deleted_truncated is False  # type: ignore[attr-defined]
    assert [r.reason for r in lines[2:]] == ["TOKEN_SIGNATURE", "TOKEN_MISSING", "TOKEN_MALFORMED"]  # type: ignore[attr-defined]
    assert all(r.peer.startswith("ipv4:127.0.0.1:") for r in lines[2:])  # type: ignore[attr-defined]


def _taken(doc_id: str) -> str:
    return f"document_id '{doc_id}' is taken by a document the caller may not read: only SUPER_ADMIN may replace it"


async def test_an_admin_replaces_or_deletes_only_what_it_may_read(tmp_path: Path) -> None:
    """An ADMIN who could not read alice's private review deleted it, or replaced it (its id then
    served the ADMIN's text to alice), and learnt from either that the id was stored."""
    async with serving(tmp_path, jwt_secret=SECRET, **JWT) as srv:
        target, metadata = f"127.0.0.1:{srv.port}", srv.app.metadata
        original = await metadata.get_document("alice-review")

        def text(doc_id: str, body: str, **fields: Any) -> pb.DocumentInput:
            return pb.DocumentInput(document_id=doc_id, filename=f"{doc_id}.txt", content=body.encode(), **fields)

        async with AsyncRetrievalClient(target, token=hs256(claims("mallory", "ADMIN"))) as mallory:
            own = text("mallory-note", "Mallory's note on kites.", access=pb.ACCESS_PRIVATE, owner_id="mallory")
            assert not (await mallory.ingest([own])).errors
            report = await mallory.ingest([text("alice-review", "Nothing to see here."), text("policy", "The salary policy changed."),
                                           text("mallory-note", "Mallory's note on kites, revised.", access=pb.ACCESS_PRIVATE, owner_id="mallory")])
            assert [(e.source, e.reason) for e in report.errors] == [("alice-review.txt", _taken("alice-review"))]
            assert [(d.document_id, d.replaced) for d in report.documents] == [("policy", True), ("mallory-note", True)]
            rows = pb.DocumentInput(filename="rows.jsonl", content=json.dumps({"_id": "alice-review", "text": "Nothing to see here."}).encode())
            report = await mallory.ingest([rows])
            assert [(e.source, e.reason) for e in report.errors] == [("rows.jsonl:line 1 (alice-review)", _taken("alice-review"))]
            assert not report.documents
            # Reported as an id that is not stored: whether it is is not the ADMIN's to learn.
            resp = await mallory.delete(["alice-review", "no-such-doc", "mallory-note"])
            assert (list(resp.deleted), list(resp.not_found)) == (["mallory-note"], ["alice-review", "no-such-doc"])
        assert await metadata.get_document("alice-review") == original
        async with AsyncRetrievalClient(target, token=hs256(claims("alice", "USER"))) as alice:
            [context] = [c for c in (await alice.query("Alice's salary increase", top_k=5, use_cache=False)).contexts
                         if c.document_id == "alice-review"]
            assert "7 percent" in context.content
        async with AsyncRetrievalClient(target, token=hs256(claims("root", "SUPER_ADMIN"))) as root:
            report = await root.ingest([text("alice-review", "Alice's review moved.", access=pb.ACCESS_PRIVATE, owner_id="alice")])
            assert not report.errors and [(d.document_id, d.replaced) for d in report.documents] == [("alice-review", True)]
            assert list((await root.delete(["alice-review"])).deleted) == ["alice-review"]


async def test_an_admin_call_refused_before_its_request_is_read_is_audited(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Too many documents, or bytes that are not the message, are refused before the caller is
    identified: such an attempt left no line."""
    async with serving(tmp_path, max_documents_per_request=2) as srv:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
            ingest = channel.unary_unary("/retrieval.v1.RetrievalService/IngestDocuments")
            delete = channel.unary_unary("/retrieval.v1.RetrievalService/DeleteDocuments")
            query = channel.unary_unary("/retrieval.v1.RetrievalService/Query")
            too_many = pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename=f"{i}.txt", content=b"x") for i in range(3)])
            with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
                for call, body in ((ingest, too_many.SerializeToString()), (delete, b"\xff"), (query, b"\xff")):
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await call(body, metadata=[("x-user-id", "mallory"), ("x-user-role", "ADMIN")])
                    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    lines = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert [(r.rpc, r.user, r.outcome, r.reason, r.documents) for r in lines] == [  # type: ignore[attr-defined]
        ("IngestDocuments", "", "INVALID_ARGUMENT", "INVALID_ARGUMENT", []),
        ("DeleteDocuments", "", "INVALID_ARGUMENT", "INVALID_ARGUMENT", []),
    ]


async def test_an_admin_call_refused_before_its_message_is_read_or_past_its_addresss_share_is_audited(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An ingest or delete whose stream ended with no message, whose message did not come within
    RETRIEVAL_REQUEST_READ_S, or whose address already had RETRIEVAL_MAX_CALLS_PER_PEER calls in
    progress was refused before anything of it ran, and left no line: only a call gRPC refuses
    before any of the server's code sees it (metadata over its limit) may leave none."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    admin = [("x-user-id", "mallory"), ("x-user-role", "ADMIN")]
    never = asyncio.Event()

    async def nothing() -> AsyncIterator[pb.DeleteDocumentsRequest]:
        await never.wait()
        yield pb.DeleteDocumentsRequest(document_ids=["policy"])

    def raw(channel: grpc.aio.Channel, rpc: str) -> Any:
        """The RPC called as a stream of requests: what a caller may send a unary method on the wire."""
        return channel.stream_unary(f"/retrieval.v1.RetrievalService/{rpc}", request_serializer=lambda m: m.SerializeToString(),
                                    response_deserializer=lambda b: b)

    refused: list[grpc.StatusCode] = []
    with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
        # A stream that ended is refused when its end arrives: under a read limit it cannot reach.
        async with serving(tmp_path / "ended", request_read_s=30, max_calls_per_peer=2) as srv:
            channels = [grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}", options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(2)]
            try:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await raw(channels[0], "IngestDocuments")(iter(()), metadata=admin, timeout=60)
                refused.append(err.value.code())
                watches = [health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest()) for channel in channels]
                for watch in watches:  # both in progress: the address's share
                    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await channels[0].unary_unary("/retrieval.v1.RetrievalService/DeleteDocuments")(
                        pb.DeleteDocumentsRequest(document_ids=["policy"]).SerializeToString(), metadata=admin, timeout=60)
                refused.append(err.value.code())
                for watch in watches:
                    watch.cancel()
            finally:
                for channel in channels:
                    await channel.close()
        # One still open is ended by the read limit alone, whenever it passes: a tiny one.
        try:
            async with serving(tmp_path / "open", request_read_s=0.01) as srv:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await raw(channel, "DeleteDocuments")(nothing(), metadata=admin, timeout=60)
                    refused.append(err.value.code())
        finally:
            never.set()
    assert refused == [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED]
    lines = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert [(r.rpc, r.user, r.outcome, r.reason, r.documents) for r in lines] == [  # type: ignore[attr-defined]
        ("IngestDocuments", "", "INVALID_ARGUMENT", "INVALID_ARGUMENT", []),
        ("DeleteDocuments", "", "RESOURCE_EXHAUSTED", "TOO_MANY_CALLS", []),
        ("DeleteDocuments", "", "DEADLINE_EXCEEDED", "REQUEST_NOT_READ", []),
    ]


async def test_an_audit_line_cuts_each_id_a_refused_caller_sent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A refused caller's ids are never validated: one of 40 MB made a 40 MB line."""
    from retrieval.v1 import retrieval_pb2_grpc

    long_id = "y" * 100_000
    async with serving(tmp_path) as srv:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            with caplog.at_level(logging.INFO, logger="retrieval_server.audit"), pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.IngestDocuments(pb.IngestDocumentsRequest(documents=[pb.DocumentInput(document_id=long_id, content=b"x"),
                                                                                pb.DocumentInput(filename="short.txt", content=b"x")]),
                                           metadata=[("x-user-id", "mallory")])
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    [line] = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert line.documents == ["y" * 256 + "…", "short.txt"] and line.document_count == 2  # type: ignore[attr-defined]
    assert line.documents_truncated is True  # type: ignore[attr-defined]


async def test_an_audit_line_lists_at_most_a_hundred_ids_and_counts_them(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A JSONL file stores a document per row: its line listed every id, megabytes for a corpus."""
    rows = "\n".join(json.dumps({"_id": f"row{i}", "text": f"Row {i} is about kites."}) for i in range(150))
    async with serving(tmp_path, jwt_secret=SECRET, **JWT) as srv:
        with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
            async with AsyncRetrievalClient(f"127.0.0.1:{srv.port}", token=hs256(claims("ops", "ADMIN"))) as client:
                report = await client.ingest([pb.DocumentInput(filename="rows.jsonl", content=rows.encode())])
    [line] = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert len(report.documents) == 150
    assert line.stored == [f"row{i}" for i in range(100)] and line.stored_count == 150  # type: ignore[attr-defined]



async def test_an_admin_call_cut_short_lists_what_it_stored_or_deleted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut by its caller's deadline or cancel, an ingest (a delete) stops after the document it is
    at; those before it stay stored (deleted), yet its line said nothing of them."""
    from retrieval.v1 import retrieval_pb2_grpc

    admin, ids = [("x-user-id", "ops"), ("x-user-role", "SUPER_ADMIN")], ["kites", "tides", "dunes"]
    waiting, written = asyncio.Event(), asyncio.Event()

    class Written(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            written.set()

    async with serving(tmp_path) as srv:
        app = srv.app
        write_lock = app.metadata.write_lock

        @asynccontextmanager
        async def taken(document_id: str, **kwargs: Any) -> AsyncIterator[bool]:
            if document_id == "tides":  # held by another writer: the call is cut while it waits, after kites
                waiting.set()
                await asyncio.Event().wait()
            async with write_lock(document_id, **kwargs) as held:
                yield held

        async def cut(call: Any, by_deadline: bool = False) -> set[str]:
            """The ids stored once ``call`` is cut as it waits for tides (by its caller, or by its
            deadline: tides waits for ever), and its line written."""
            await waiting.wait()
            if not by_deadline:
                call.cancel()
            await written.wait()
            waiting.clear()
            written.clear()
            return {d for d in ids if await app.metadata.get_document(d) is not None}

        monkeypatch.setattr(app.metadata, "write_lock", taken)
        audit = logging.getLogger("retrieval_server.audit")
        audit.addHandler(handler := Written())
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
                stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
                documents = [pb.DocumentInput(document_id=d, filename=f"{d}.txt", content=f"A note on {d}.".encode()) for d in ids]
                with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
                    after_ingest = await cut(stub.IngestDocuments(pb.IngestDocumentsRequest(documents=documents), metadata=admin))
                    after_delete = await cut(stub.DeleteDocuments(pb.DeleteDocumentsRequest(document_ids=ids), metadata=admin))
                    after_late = await cut(stub.IngestDocuments(pb.IngestDocumentsRequest(documents=documents), metadata=admin, timeout=1),
                                           by_deadline=True)
        finally:
            audit.removeHandler(handler)
    ingested, deleted, late = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert after_ingest == {"kites"} and after_delete == set() and after_late == {"kites"}
    # Who wrote, also when the deadline cut the call: grpc.aio names no peer once it has expired one.
    assert all(line.peer.startswith(("ipv4:", "ipv6:")) for line in (ingested, deleted, late)), [r.peer for r in (ingested, deleted, late)]  # type: ignore[attr-defined]
    # What its caller and grpc_server_handled_total see: the line said CANCELLED.
    assert (late.outcome, late.stored) == ("DEADLINE_EXCEEDED", ["kites"])  # type: ignore[attr-defined]
    assert (ingested.rpc, ingested.outcome, ingested.stored) == ("IngestDocuments", "CANCELLED", ["kites"])  # type: ignore[attr-defined]
    assert (deleted.rpc, deleted.outcome, deleted.deleted) == ("DeleteDocuments", "CANCELLED", ["kites"])  # type: ignore[attr-defined]


async def _until(predicate: Any) -> None:
    """Until ``predicate()`` holds, looking again each time the loop has run others: a condition
    of the server's (a counter), waited for, not a time guessed for it (the bound only ends a run
    that would hang)."""
    loop = asyncio.get_running_loop()
    bound = loop.time() + 120
    while not predicate():
        assert loop.time() < bound, "condition never held"
        await asyncio.sleep(0.01)


def _handled(srv: RunningServer, rpc: str, code: str) -> float:
    """grpc_server_handled_total of ``rpc`` ending with ``code`` (Go's spelling): counted once the
    server is done with the call, whatever its layers wrote."""
    return srv.app.metrics.registry.get_sample_value("grpc_server_handled_total", {
        "grpc_type": "unary", "grpc_service": "retrieval.v1.RetrievalService", "grpc_method": rpc, "grpc_code": code}) or 0.0


async def test_an_admin_call_cut_short_while_its_caller_is_verified_is_audited_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An ingest whose deadline passed, or whose caller cancelled it, while its token waited for the
    identity provider's keys (a key rotated in: a JWKS fetch for its kid) ended DEADLINE_EXCEEDED or
    CANCELLED and left no audit line: the authentication layer writes one for the calls it refuses
    only, and the servicer, which writes one for every call it runs, never ran."""
    from retrieval.v1 import retrieval_pb2_grpc

    keys = RsaKeys()
    keys.add("k1")
    held_jwks = HeldJwks(keys)
    asked, answer = held_jwks.asked, held_jwks.released
    answer.set()  # the start-up's fetch (its first health report) is answered, with k1 alone

    ingest = pb.IngestDocumentsRequest(documents=[pb.DocumentInput(document_id="kites", filename="kites.txt", content=b"A note on kites.")])
    with get_json_server(held_jwks) as idp:
        try:
            # No Health follower fetching meanwhile: the calls' own fetch is the one held.
            async with serving(tmp_path, jwt_jwks_url=f"{idp.url}/jwks", jwt_jwks_min_refresh_s=0.0, health_interval_s=3600, **JWT) as srv:
                asked.clear()
                answer.clear()
                keys.add("k2")  # signing the calls' tokens: unknown to the server, whose next fetch is held
                token = [("authorization", f"Bearer {keys.sign(claims('ops', 'ADMIN'), 'k2')}")]
                async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
                    await channel.channel_ready()
                    stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)

                    def cut() -> float:
                        """The ingests the server is done with, cut by a deadline or a cancel."""
                        return _handled(srv, "IngestDocuments", "DeadlineExceeded") + _handled(srv, "IngestDocuments", "Canceled")

                    with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
                        # The first call starts the fetch, held for ever: the next one's deadline passes
                        # while that fetch is held, however far the call had got by then (a deadline
                        # sized to reach the fetch first failed on a busy host).
                        first = stub.IngestDocuments(ingest, metadata=token)
                        assert await asyncio.to_thread(asked.wait, 120)  # the bound only ends a run that would hang
                        with pytest.raises(grpc.aio.AioRpcError) as err:
                            await stub.IngestDocuments(ingest, metadata=token, timeout=2)
                        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                        await _until(lambda: cut() == 1)
                        # What the metrics name it: the caller's deadline reaches the server as a cancel
                        # (RST_STREAM) when that comes before the server's own timer for it.
                        late = "DEADLINE_EXCEEDED" if _handled(srv, "IngestDocuments", "DeadlineExceeded") else "CANCELLED"
                        first.cancel()  # still waiting for the fetch it started
                        await _until(lambda: cut() == 2)
                        answer.set()
                        # A call the servicer runs is audited by it alone, once.
                        async with AsyncRetrievalClient(f"127.0.0.1:{srv.port}", token=keys.sign(claims("ops", "ADMIN"), "k2")) as client:
                            assert list((await client.delete(["no-such-doc"])).not_found) == ["no-such-doc"]
        finally:
            answer.set()
    lines = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert [(r.rpc, r.user, r.role, r.verified_by, r.outcome, r.documents) for r in lines] == [  # type: ignore[attr-defined]
        ("IngestDocuments", "", "", "", late, []),
        ("IngestDocuments", "", "", "", "CANCELLED", []),
        ("DeleteDocuments", "ops", "ADMIN", "jwt", "OK", ["no-such-doc"]),
    ]
    # Who asked, also once the deadline passed (grpc.aio then names no peer).
    assert all(r.peer.startswith("ipv4:127.0.0.1:") for r in lines), [r.peer for r in lines]  # type: ignore[attr-defined]


async def test_an_admin_call_cut_short_while_its_message_is_awaited_is_audited_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A delete its caller cancelled, or an ingest whose deadline passed, before sending its message
    (which RETRIEVAL_REQUEST_READ_S would wait for much longer) left no audit line: the admission
    layer wrote one only for the calls it refused itself."""
    admin = [("x-user-id", "mallory"), ("x-user-role", "ADMIN")]
    never = asyncio.Event()

    async def nothing() -> AsyncIterator[Any]:
        await never.wait()
        yield pb.DeleteDocumentsRequest()

    def raw(channel: grpc.aio.Channel, rpc: str) -> Any:
        """The RPC called as a stream of requests: what a caller may send a unary method on the wire."""
        return channel.stream_unary(f"/retrieval.v1.RetrievalService/{rpc}", request_serializer=lambda m: m.SerializeToString(),
                                    response_deserializer=lambda b: b)

    async def slot_held(channel: grpc.aio.Channel) -> bool:
        """Whether this address's one call at a time (RETRIEVAL_MAX_CALLS_PER_PEER=1) is taken: a
        Health call is then refused TOO_MANY_CALLS, else answered."""
        health = channel.unary_unary("/retrieval.v1.RetrievalService/Health", request_serializer=lambda m: m.SerializeToString(),
                                     response_deserializer=pb.HealthResponse.FromString)
        try:
            await health(pb.HealthRequest())
        except grpc.aio.AioRpcError as exc:
            assert reason(exc) == "TOO_MANY_CALLS"
            return True
        return False

    async def holding_the_slot(channel: grpc.aio.Channel, rpc: str) -> Any:
        """A call of ``rpc`` that sends no message, once the server holds it waiting for one. A
        probe that came first takes the slot, and the call is refused TOO_MANY_CALLS (a line of
        its own): it is made again."""
        while True:
            call = raw(channel, rpc)(nothing(), metadata=admin)
            while not call.done():
                if await slot_held(channel):
                    return call

    outcomes = []
    try:
        async with serving(tmp_path, request_read_s=600, max_calls_per_peer=1) as srv:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
                with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
                    call = await holding_the_slot(channel, "DeleteDocuments")
                    call.cancel()
                    while await slot_held(channel):  # and out: the server is done with it
                        pass
                    outcomes.append(await call.code())
                    # A deadline the server may not reach on a busy machine: when the call ended
                    # before the server was seen holding it, it is made again with twice the time.
                    attempts, seen, timeout = 0, False, 0.5
                    while not seen:
                        attempts += 1
                        call = raw(channel, "IngestDocuments")(nothing(), metadata=admin, timeout=timeout)
                        while not call.done() and not seen:
                            seen = await slot_held(channel)
                        with pytest.raises(grpc.aio.AioRpcError) as err:
                            await call
                        while await slot_held(channel):
                            pass
                        timeout *= 2
                    outcomes.append(err.value.code())
    finally:
        never.set()
    assert outcomes == [grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED]
    lines = [r for r in caplog.records if r.name == "retrieval_server.audit" and getattr(r, "reason", None) != "TOO_MANY_CALLS"]
    # The caller's deadline reaches the server as a cancel (RST_STREAM) when that comes before the
    # server's own timer for it: then the server, its metrics and its line say CANCELLED.
    late = lines[-1].outcome if lines and lines[-1].outcome == "CANCELLED" else "DEADLINE_EXCEEDED"  # type: ignore[attr-defined]
    assert [(r.rpc, r.user, r.role, r.outcome, r.documents) for r in lines[:1]] == [("DeleteDocuments", "", "", "CANCELLED", [])]  # type: ignore[attr-defined]
    # The ingest the server was seen holding has its line; an earlier attempt cut before that may
    # have one too (its handler ran between two looks), never more than one a call.
    ingests = [(r.rpc, r.user, r.role, r.outcome, r.documents) for r in lines[1:]]  # type: ignore[attr-defined]
    assert 1 <= len(ingests) <= attempts, (ingests, attempts)
    assert ingests[-1] == ("IngestDocuments", "", "", late, [])
    assert all(i[:3] == ("IngestDocuments", "", "") and i[3] in ("CANCELLED", "DEADLINE_EXCEEDED") for i in ingests), ingests
    assert all(r.peer.startswith("ipv4:127.0.0.1:") for r in lines), [r.peer for r in lines]  # type: ignore[attr-defined]


async def test_an_admin_request_over_max_message_mb_is_audited_as_cut_short(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The README said a request over MAX_MESSAGE_MB left no line, gRPC refusing it before any of
    the server's code saw it: gRPC refuses it once the call has begun, and the admission layer,
    awaiting the message, sees the call end without one, as a cancel; its line says so."""
    admin = [("x-user-id", "mallory"), ("x-user-role", "ADMIN")]
    big = pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="big.txt", content=b"x" * (2 * 1024 * 1024 + 1))])
    async with serving(tmp_path, max_message_mb=2, max_document_bytes=1024 * 1024) as srv:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
            with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await channel.unary_unary("/retrieval.v1.RetrievalService/IngestDocuments")(big.SerializeToString(), metadata=admin)
                assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                # Its caller has the status before the server's handler has seen the call end.
                await _until(lambda: any(r.name == "retrieval_server.audit" for r in caplog.records))
    lines = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert [(r.rpc, r.user, r.outcome, getattr(r, "reason", None), r.documents) for r in lines] == [  # type: ignore[attr-defined]
        ("IngestDocuments", "", "CANCELLED", None, []),
    ]


async def test_readiness_is_not_serving_from_start_up_while_no_signing_key_can_be_had(tmp_path: Path) -> None:
    """Readiness was SERVING from start-up until the first follow-up report, HEALTH_INTERVAL_S
    later, while every call with a token was UNAVAILABLE: a load balancer sent it queries."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    keys = RsaKeys()
    keys.add("k1")
    with get_json_server(keys.jwks) as stopped:
        pass
    async with serving(tmp_path, jwt_jwks_url=f"{stopped.url}/jwks", jwt_jwks_min_refresh_s=0.0, health_interval_s=3600.0, **JWT) as srv:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            ready = await health.Check(health_pb2.HealthCheckRequest(service="retrieval.v1.RetrievalService"))
            assert ready.status == health_pb2.HealthCheckResponse.NOT_SERVING
            assert (await health.Check(health_pb2.HealthCheckRequest())).status == health_pb2.HealthCheckResponse.SERVING  # alive


async def test_health_says_auth_fails_while_no_signing_key_can_be_had_and_turns_readiness(tmp_path: Path) -> None:
    """With RETRIEVAL_JWT_JWKS_URL at a stopped identity provider, every call with a token was
    UNAVAILABLE (and one without TOKEN_MISSING: no RPC but Health is served without a token in
    jwt mode), and Health said `auth` OK and the service SERVING, a readiness probe too. The
    component is required: without keys the service answers nothing."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from retrieval.v1 import retrieval_pb2_grpc

    keys = RsaKeys()
    keys.add("k1")
    with get_json_server(keys.jwks) as stopped:
        port = int(stopped.url.rsplit(":", 1)[1])
    token = [("authorization", f"Bearer {keys.sign(claims('dave'), 'k1')}")]
    async with serving(tmp_path, jwt_jwks_url=f"{stopped.url}/jwks/realm-7", jwt_jwks_min_refresh_s=0.0, health_interval_s=0.2, **JWT) as srv:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            ready = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service="retrieval.v1.RetrievalService"))

            async def readiness(status: int) -> None:
                """Until the readiness Watch says ``status`` (it sends each change as it is made; the
                bound only ends a run that would hang)."""
                async with asyncio.timeout(120):
                    while (await ready.read()).status != status:
                        pass

            resp = await stub.Health(pb.HealthRequest())
            auth = {c.name: c for c in resp.components}["auth"]
            assert (resp.status, auth.status) == (pb.SERVING_STATUS_NOT_SERVING, pb.SERVING_STATUS_NOT_SERVING), auth.detail
            assert "no signing keys" in auth.detail and "ConnectError" in auth.detail, auth.detail
            assert "realm-7" not in auth.detail and str(port) not in auth.detail  # Health answers callers without credentials
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Query(pb.QueryRequest(query=QUESTION), metadata=token)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE  # what Health now says
            # Readiness follows (RETRIEVAL_HEALTH_INTERVAL_S): no call can be answered.
            await readiness(health_pb2.HealthCheckResponse.NOT_SERVING)
            with get_json_server(keys.jwks, port=port):  # the identity provider is back
                resp = await stub.Health(pb.HealthRequest())
                auth = {c.name: c for c in resp.components}["auth"]
                assert (resp.status, auth.status) == (pb.SERVING_STATUS_SERVING, pb.SERVING_STATUS_SERVING), auth.detail
                assert auth.detail.startswith("jwt: bearer tokens"), auth.detail
                await readiness(health_pb2.HealthCheckResponse.SERVING)
                assert docs(await stub.Query(pb.QueryRequest(query=QUESTION), metadata=token))
            ready.cancel()
