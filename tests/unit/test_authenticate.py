"""The authentication layer refuses, and audits, a call whose credentials fail to verify in a way
no one foresaw, as it does an invalid token: never UNKNOWN without details or an audit line."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import grpc
import pytest

from google.rpc import error_details_pb2, status_pb2

from retrieval_server.api.auth import SERVICE_PREFIX, Authenticate, GatewayAuthenticator, HeaderAuthenticator, _metadata, current_identity
from retrieval_server.domain import Identity, InvalidArgument, Role, ServiceError, Unauthenticated
from tests.unit.test_rpc_status import Context


class Failing:
    mode = "jwt"
    reads = frozenset({"authorization"})

    async def identify(self, metadata: Callable[[], Mapping[str, str]], context: grpc.aio.ServicerContext, required: bool) -> Identity:
        metadata()
        raise KeyError("a failure outside the domain's errors")

    async def close(self) -> None:
        pass


class CallContext(Context):
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", "Bearer x"),)


async def test_an_unforeseen_failure_verifying_credentials_is_refused_with_details_and_audited() -> None:
    refused: list[tuple[str, ServiceError]] = []
    method = f"{SERVICE_PREFIX}DeleteDocuments"
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: None)
    wrapped = Authenticate(Failing(), on_refused=lambda m, ctx, exc: refused.append((m, exc)))(method, handler)
    context = CallContext()
    with pytest.raises(grpc.aio.AbortError):
        await wrapped.unary_unary(b"", context)
    assert context.code() == grpc.StatusCode.INTERNAL
    status = status_pb2.Status.FromString(dict(context.trailing)["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info) and info.reason == "INTERNAL"
    assert [m for m, _ in refused] == [method]


class HeadersContext(Context):
    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        super().__init__()
        self._metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata


async def test_groups_header_sent_twice_is_refused_naming_it() -> None:
    """Which of two lists names the caller's groups is a guess, as with the other identity headers:
    a proxy may add its own beside the one the caller sent."""
    method = f"{SERVICE_PREFIX}Query"
    seen: list[Identity] = []

    async def behavior(request: bytes, context: grpc.aio.ServicerContext) -> None:
        seen.append(current_identity())

    handler = grpc.unary_unary_rpc_method_handler(behavior)
    wrapped = Authenticate(HeaderAuthenticator())(method, handler)
    await wrapped.unary_unary(b"", HeadersContext((("x-user-id", "dave"), ("x-user-groups", "eng, hr"))))
    assert seen[0].principals == ("dave", "group:eng", "group:hr")
    context = HeadersContext((("x-user-id", "dave"), ("x-user-groups", "eng"), ("X-User-Groups", "hr")))
    with pytest.raises(grpc.aio.AbortError):
        await wrapped.unary_unary(b"", context)
    assert context.status == (grpc.StatusCode.INVALID_ARGUMENT, "x-user-groups must be sent at most once")
    status = status_pb2.Status.FromString(dict(context.trailing)["grpc-status-details-bin"])
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad) and [v.field for v in bad.field_violations] == ["x-user-groups"]


@pytest.mark.parametrize("header", ["x-user-groups", "x-user-id", "x-user-role"])
async def test_an_identity_header_longer_than_any_identity_is_refused_before_it_is_read(header: str) -> None:
    """gRPC takes metadata of any length before the client acknowledges its settings: 14.9 MB of
    x-user-groups took 3 s and 400 MB to split into a set before its groups were counted."""
    from retrieval_server.api.identity import MAX_IDENTITY_HEADER_BYTES

    method = f"{SERVICE_PREFIX}Query"
    wrapped = Authenticate(HeaderAuthenticator())(method, grpc.unary_unary_rpc_method_handler(lambda request, context: None))
    longest = ",".join("g" * 255 for _ in range(1_000))
    assert len(longest) <= MAX_IDENTITY_HEADER_BYTES  # the most groups a caller may name, each as long as it may be
    context = HeadersContext((("x-user-id", "dave"), (header, "," * (MAX_IDENTITY_HEADER_BYTES + 1))) if header != "x-user-id"
                             else ((header, "d" * (MAX_IDENTITY_HEADER_BYTES + 1)),))
    with pytest.raises(grpc.aio.AbortError):
        await wrapped.unary_unary(b"", context)
    assert context.status == (grpc.StatusCode.INVALID_ARGUMENT, f"{header} must be at most {MAX_IDENTITY_HEADER_BYTES} bytes (got {MAX_IDENTITY_HEADER_BYTES + 1})")
    status = status_pb2.Status.FromString(dict(context.trailing)["grpc-status-details-bin"])
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad) and [v.field for v in bad.field_violations] == [header]


def test_a_token_longer_than_any_identity_is_refused_before_it_is_verified() -> None:
    from retrieval_server.api.identity import MAX_AUTHORIZATION_BYTES

    at_limit = "Bearer " + "a" * (MAX_AUTHORIZATION_BYTES - len("Bearer "))
    assert _metadata(HeadersContext((("authorization", at_limit),)), frozenset({"authorization"}))  # type: ignore[arg-type]
    context = HeadersContext((("authorization", at_limit + "a"),))
    with pytest.raises(Unauthenticated, match=f"authorization must be at most {MAX_AUTHORIZATION_BYTES} bytes") as err:
        _metadata(context, frozenset({"authorization"}))  # type: ignore[arg-type]
    assert err.value.reason == "TOKEN_MALFORMED"


class GatewayContext(HeadersContext):
    """A call from a mutual-TLS peer whose certificate names ``san`` in its SANs (a DNS name, or a URI)."""

    def __init__(self, metadata: tuple[tuple[str, str], ...], san: str = "gateway.internal") -> None:
        super().__init__(metadata)
        self._san = san

    def auth_context(self) -> dict[str, list[bytes]]:
        kind = "peer_uri" if "://" in self._san else "peer_dns"
        return {"x509_subject_alternative_name": [self._san.encode()], kind: [self._san.encode()]}


async def _gateway_identity(metadata: tuple[tuple[str, str], ...], san: str = "gateway.internal", peers: tuple[str, ...] = ("gateway.internal",)) -> Identity:
    context = GatewayContext(metadata, san)
    return await GatewayAuthenticator(peers).identify(lambda: _metadata(context, GatewayAuthenticator.reads), context, True)  # type: ignore[arg-type]


async def test_a_gateway_role_comes_with_a_user_id() -> None:
    """An ADMIN without a user was believed: its writes were audited as no one's (a token needs a user claim)."""
    assert (await _gateway_identity((("x-user-id", "ops"), ("x-user-role", "ADMIN")))).principals == ("ops",)
    assert (await _gateway_identity(())).role is Role.ANONYMOUS
    for role in ("ADMIN", "SUPER_ADMIN", "USER"):
        with pytest.raises(InvalidArgument, match="^x-user-role must come with x-user-id") as err:
            await _gateway_identity((("x-user-role", role),))
        assert err.value.violations[0][0] == "x-user-id"
    # Mode none is the local development mode: a role alone is still believed there.
    assert HeaderAuthenticator()._identities({"x-user-role": "ADMIN"}).role is Role.ADMIN


async def test_a_gateway_dns_name_is_matched_whatever_its_case_and_a_uri_exactly() -> None:
    """A CA may write the gateway's name as Gateway.Internal: a DNS name is case-insensitive, and the
    gateway was refused as PEER_NOT_ALLOWED."""
    headers = (("x-user-id", "ops"),)
    for san, peers in (("Gateway.Internal", ("gateway.internal",)), ("gateway.internal", ("GATEWAY.internal",)),
                       ("spiffe://example.org/gw", ("spiffe://example.org/gw",))):
        assert (await _gateway_identity(headers, san, peers)).principals == ("ops",)
    with pytest.raises(Unauthenticated):
        await _gateway_identity(headers, "spiffe://Example.org/gw", ("spiffe://example.org/gw",))
