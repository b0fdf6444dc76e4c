"""A USER never receives a private document they may not read: whatever headers they add, whoever
asked the same question before them, through every strategy, Search, sub-queries and the cache.

Run in both authenticated modes (issue #10): ``jwt`` (identities in tokens; headers are ignored)
and ``gateway`` (identities in headers, believed only from the allow-listed gateway). Callers are
played in the order that used to leak through the cache (issue #9): the most privileged first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from google.protobuf import text_format

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import AsyncRetrievalClient, Tls
from retrieval_server.domain import Access, DocumentSource
from tests.e2e.test_authentication import CORPUS, PRIVATE, docs, serving
from tests.support.pki import Authority
from tests.support.tokens import AUDIENCE, ISSUER, SECRET, claims, hs256

pytestmark = pytest.mark.slow

QUESTIONS = ["what is the salary increase", "SALARY INCREASE  review", "salary increase review percent and who may read the review"]
STRATEGIES = ["semantic", "keyword", "hybrid", "adaptive", "graph"]
#: relations the graph leg follows, beside the salary documents (which state none): a private
#: document's, bob's, whose entities are known to no public document, and a public one's that
#: shares an entity with it (LedgerDB), so that expanding from it would reach the private ones
RELATIONS = [
    DocumentSource(filename="vault.txt", content=b"ProjectZephyr depends on VaultKeeper. VaultKeeper uses LedgerDB.", document_id="vault-plan",
                   access=Access.PRIVATE, owner_id="bob"),
    DocumentSource(filename="ledger.txt", content=b"AuthService uses LedgerDB. AuthService depends on TokenStore.", document_id="ledger-notes"),
]
RELATED_PRIVATE = {"vault-plan"}
#: names only the private relations state: never in an answer to a caller who may not read them
PRIVATE_NAMES = ("ProjectZephyr", "VaultKeeper")
GRAPH_QUESTIONS = ["what uses LedgerDB", "which services depend on VaultKeeper", "what does ProjectZephyr depend on"]


@dataclass(frozen=True)
class Caller:
    name: str
    #: the private documents this caller may read
    allowed: frozenset[str]
    #: the claims of the caller's token (jwt; empty: no token), minted when its client is made, or
    #: identity headers (gateway)
    jwt: dict[str, Any]
    gateway: dict[str, Any]
    #: headers a hostile caller adds on top
    forged: dict[str, Any]


def _claims(sub: str, role: str, **extra: Any) -> dict[str, Any]:
    # Claims, not a token: one minted at import would expire before a full suite reaches these tests.
    return {"sub": sub, "role": role, **extra}


CALLERS = [
    # Without a token in mode jwt; a gateway's role comes with a user id.
    Caller("root, a super admin", frozenset(PRIVATE | RELATED_PRIVATE), {}, {"user_id": "root", "role": "SUPER_ADMIN"}, {}),
    Caller("bob as SUPER_ADMIN", frozenset(PRIVATE | RELATED_PRIVATE), _claims("bob", "SUPER_ADMIN"), {"user_id": "bob", "role": "SUPER_ADMIN"}, {}),
    Caller("bob as USER", frozenset({"bob-review", "vault-plan"}), _claims("bob", "USER"), {"user_id": "bob", "role": "USER"},
           {"user_id": "alice", "role": "SUPER_ADMIN"}),
    Caller("carol, bob's grantee", frozenset({"bob-review"}), _claims("carol", "USER"), {"user_id": "carol", "role": "USER"},
           {"role": "ADMIN"}),
    Caller("dave, reads nothing private", frozenset(), _claims("dave", "USER"), {"user_id": "dave"}, {"user_id": "bob", "role": "SUPER_ADMIN"}),
    Caller("erin of group eng", frozenset({"eng-budget"}), _claims("erin", "USER", groups=["eng"]), {}, {"user_id": "hr"}),
    Caller("anonymous", frozenset(), {}, {}, {"role": "SUPER_ADMIN"}),
]


@dataclass
class Deployment:
    mode: str
    target: str
    tls: Tls | None
    server: Any
    #: gateway mode: a client certificate from the same CA that is not an allowed gateway
    intruder: Tls | None = None

    def client(self, caller: Caller, forge: bool = False) -> AsyncRetrievalClient:
        """The caller's client; ``forge``: with hostile identity headers added. In jwt mode they ride
        on the caller's own token; in gateway mode the caller bypasses the gateway with a
        certificate of its own."""
        if self.mode == "jwt":
            token = {"token": hs256(claims(**caller.jwt))} if caller.jwt else {}
            return AsyncRetrievalClient(self.target, tls=self.tls, timeout=120, **{**token, **(caller.forged if forge else {})})
        if forge:
            return AsyncRetrievalClient(self.target, tls=self.intruder, timeout=120, **caller.forged)
        return AsyncRetrievalClient(self.target, tls=self.tls, timeout=120, **caller.gateway)

    def refused(self, caller: Caller, forge: bool) -> bool:
        """Whether the service refuses this caller outright (UNAUTHENTICATED) instead of answering."""
        return (self.mode == "jwt" and not caller.jwt) or (self.mode == "gateway" and forge)


@pytest_asyncio.fixture(params=["jwt", "gateway"], scope="module")
async def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deployment]:
    root = tmp_path_factory.mktemp(f"adversarial-{request.param}")
    # Sub-queries run on every question with several parts: sufficiency is never reached.
    common: dict[str, Any] = {"sufficiency_threshold": 1.01, "max_iterations": 1}
    if request.param == "jwt":
        async with serving(root / "data", auth_mode="jwt", jwt_secret=SECRET, jwt_issuer=ISSUER, jwt_audience=AUDIENCE,
                           jwt_groups_claim="groups", **common) as srv:
            assert not (await srv.app.ingest(RELATIONS)).errors
            yield Deployment("jwt", f"127.0.0.1:{srv.port}", None, srv)
    else:
        ca = Authority(root / "pki", "ca")
        server, gateway = ca.issue("server", ips=("127.0.0.1",)), ca.issue("gw", dns=("gateway.internal",), client=True)
        intruder = ca.issue("intruder", dns=("intruder.internal",), client=True)
        async with serving(root / "data", auth_mode="gateway", tls_cert=server.cert, tls_key=server.key, tls_client_ca=ca.ca,
                           gateway_peers="gateway.internal", **common) as srv:
            assert not (await srv.app.ingest(RELATIONS)).errors
            yield Deployment("gateway", f"127.0.0.1:{srv.port}", Tls(ca=ca.ca, cert=gateway.cert, key=gateway.key), srv,
                             Tls(ca=ca.ca, cert=intruder.cert, key=intruder.key))


def _callers(mode: str) -> list[Caller]:
    # Group membership comes from a verified token only; a gateway forwards no groups.
    return [c for c in CALLERS if mode == "jwt" or c.name != "erin of group eng"]


def _shown(resp: pb.QueryResponse) -> str:
    """What the answer tells the caller beyond their own words (the query, its rewrite and parts)."""
    shown = pb.QueryResponse()
    shown.CopyFrom(resp)
    shown.ClearField("query")
    shown.metrics.ClearField("rewritten_query")
    shown.metrics.ClearField("sub_queries")
    return text_format.MessageToString(shown, as_utf8=True)


async def _ask(deployment: Deployment, caller: Caller, question: str, strategy: str, forge: bool) -> set[str]:
    async with deployment.client(caller, forge) as client:
        try:
            resp = await client.query(question, top_k=6, strategy=strategy)
        except grpc.aio.AioRpcError as exc:
            assert deployment.refused(caller, forge) and exc.code() == grpc.StatusCode.UNAUTHENTICATED, (caller.name, exc)
            return set()
    assert not deployment.refused(caller, forge), f"{caller.name} was answered"
    if not RELATED_PRIVATE <= caller.allowed:
        # The graph trace names entities and hops: one only a private document states is as much a leak as its text.
        named = [n for n in PRIVATE_NAMES if n.lower() not in question.lower() and n in _shown(resp)]
        assert not named, f"{deployment.mode}: {caller.name} (forged headers: {forge}) was told of {named} ({strategy}: {question!r})"
    return docs(resp) & (PRIVATE | RELATED_PRIVATE)


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_no_caller_reads_beyond_its_rights_whoever_asked_first(deployment: Deployment, strategy: str) -> None:
    # The salary documents state no relation, which the graph leg alone follows: it is asked about the relations'.
    questions, sought = (GRAPH_QUESTIONS, RELATED_PRIVATE) if strategy == "graph" else (QUESTIONS, PRIVATE)
    reached: dict[str, set[str]] = {c.name: set() for c in CALLERS}
    for question in questions:
        for forge in (False, True):
            for caller in _callers(deployment.mode):  # the most privileged first: their answers are cached first
                seen = await _ask(deployment, caller, question, strategy, forge)
                assert seen <= caller.allowed, f"{deployment.mode}: {caller.name} (forged headers: {forge}) read {seen - caller.allowed}"
                reached[caller.name] |= seen
    # And not vacuously: every caller that is answered reaches what it may read of what was asked about.
    for caller in _callers(deployment.mode):
        if not deployment.refused(caller, False):
            assert reached[caller.name] & sought == caller.allowed & sought, (deployment.mode, strategy, caller.name, reached[caller.name])


async def test_search_obeys_the_same_rights(deployment: Deployment) -> None:
    for caller in _callers(deployment.mode):
        for forge in (False, True):
            async with deployment.client(caller, forge) as client:
                try:
                    resp = await client.search("salary increase review", top_k=10)
                except grpc.aio.AioRpcError as exc:
                    assert deployment.refused(caller, forge) and exc.code() == grpc.StatusCode.UNAUTHENTICATED
                    continue
            assert docs(resp) & PRIVATE <= caller.allowed, caller.name


async def test_a_revoked_grant_is_not_served_from_the_cache(deployment: Deployment) -> None:
    carol = next(c for c in CALLERS if c.name.startswith("carol"))
    question = "whose salary review may carol read"
    assert "bob-review" in await _ask(deployment, carol, question, "hybrid", False)
    bob_admin = Caller("bob admin", frozenset({"bob-review", "vault-plan"}), _claims("bob", "ADMIN"), {"user_id": "bob", "role": "ADMIN"}, {})
    revoked = next(d for d in CORPUS if d.document_id == "bob-review")
    async with deployment.client(bob_admin) as client:
        resp = await client.ingest([pb.DocumentInput(document_id=revoked.document_id, filename=revoked.filename, content=revoked.content,
                                                     access=pb.ACCESS_PRIVATE, owner_id="bob")])
        assert not resp.errors
    try:
        assert "bob-review" not in await _ask(deployment, carol, question, "hybrid", False)
    finally:
        async with deployment.client(bob_admin) as client:  # restore the grant for the other tests
            await client.ingest([pb.DocumentInput(document_id=revoked.document_id, filename=revoked.filename, content=revoked.content,
                                                  access=pb.ACCESS_PRIVATE, owner_id="bob", granted_user_ids=["carol"])])


async def test_roles_cannot_be_escalated_through_headers(deployment: Deployment) -> None:
    for caller in _callers(deployment.mode):
        if caller.allowed == frozenset(PRIVATE | RELATED_PRIVATE) or not caller.forged:
            continue
        async with deployment.client(caller, forge=True) as client:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.delete(["policy"])
        assert err.value.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED), caller.name
